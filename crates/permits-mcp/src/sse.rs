//! Server-sent events as the streamable-HTTP transport uses them (the WHATWG `text/event-stream` format):
//! lines ended by `\n` or `\r\n`, `data:` lines joined by `\n`, an event dispatched at a blank line, comments
//! (`:` first) and `retry:` ignored. [`SseReader`] reads events with a size limit.

use std::io::{self, BufRead, Read};

/// One event as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Its `event:` type; empty when none was given (the default type, `message`).
    pub event: String,
    /// Its `data:` lines joined by `\n`; empty for an event without data (a resumption's priming event).
    pub data: String,
    /// Its `id:`, if any.
    pub id: Option<String>,
}

impl Event {
    /// Whether the event carries a message: the default type or `message`, and some data.
    pub fn is_message(&self) -> bool {
        (self.event.is_empty() || self.event == "message") && !self.data.is_empty()
    }
}

/// Reads events from a stream, each line and each event's data at most `limit` bytes.
pub struct SseReader<R> {
    inner: R,
    limit: usize,
}

fn too_long(limit: usize) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("an event stream line or event is over {limit} bytes"))
}

impl<R: BufRead> SseReader<R> {
    /// A reader of `inner` with lines and events of at most `limit` bytes.
    pub fn new(inner: R, limit: usize) -> SseReader<R> {
        SseReader { inner, limit }
    }

    /// One line without its ending; `None` at the end of the stream.
    fn line(&mut self) -> io::Result<Option<String>> {
        let mut bytes = Vec::new();
        let read = (&mut self.inner).take(self.limit as u64 + 2).read_until(b'\n', &mut bytes)?;
        if read == 0 {
            return Ok(None);
        }
        let ended = bytes.last() == Some(&b'\n');
        if ended {
            bytes.pop();
            if bytes.last() == Some(&b'\r') {
                bytes.pop();
            }
        }
        if bytes.len() > self.limit {
            return Err(too_long(self.limit));
        }
        String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "an event stream line is not UTF-8"))
    }

    /// The next event; `Ok(None)` at the end of the stream (an event not ended by a blank line is dropped, as
    /// the format says).
    ///
    /// Errors: the read's; [`io::ErrorKind::InvalidData`] for a line or an event's data over the limit, or a
    /// line that is not UTF-8.
    pub fn next_event(&mut self) -> io::Result<Option<Event>> {
        let mut event = Event { event: String::new(), data: String::new(), id: None };
        let mut data_lines = 0usize;
        let mut any = false;
        while let Some(line) = self.line()? {
            if line.is_empty() {
                if any {
                    return Ok(Some(event));
                }
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = match line.split_once(':') {
                Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                None => (line.as_str(), ""),
            };
            match field {
                "data" => {
                    if data_lines > 0 {
                        event.data.push('\n');
                    }
                    event.data.push_str(value);
                    data_lines += 1;
                    if event.data.len() > self.limit {
                        return Err(too_long(self.limit));
                    }
                }
                "event" => event.event = value.to_string(),
                "id" if !value.contains('\0') => event.id = Some(value.to_string()),
                _ => continue,
            }
            any = true;
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(text: &str, limit: usize) -> Result<Vec<Event>, String> {
        let mut r = SseReader::new(text.as_bytes(), limit);
        let mut out = Vec::new();
        loop {
            match r.next_event() {
                Ok(Some(e)) => out.push(e),
                Ok(None) => return Ok(out),
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    fn ev(event: &str, data: &str, id: Option<&str>) -> Event {
        Event { event: event.into(), data: data.into(), id: id.map(str::to_string) }
    }

    #[test]
    fn events_are_read_as_the_format_says() {
        let text = ": a comment\r\nevent: message\r\ndata: {\"a\":1}\r\n\r\nid: 7\ndata:x\ndata: y\nretry: 10\n\n\n\ndata\n\nevent: ping\n\ndata: cut";
        assert_eq!(
            events(text, 100),
            Ok(vec![
                ev("message", "{\"a\":1}", None),
                ev("", "x\ny", Some("7")),
                ev("", "", None),
                ev("ping", "", None),
            ])
        );
        assert!(ev("message", "{}", None).is_message() && ev("", "{}", None).is_message());
        assert!(!ev("ping", "{}", None).is_message() && !ev("", "", Some("1")).is_message());
    }

    #[test]
    fn over_the_limit_is_an_error() {
        assert!(events(&format!("data: {}\n\n", "a".repeat(50)), 20).is_err_and(|e| e.contains("over 20 bytes")));
        let many = "data: aaaaaaaaaa\n".repeat(5) + "\n";
        assert!(events(&many, 30).is_err_and(|e| e.contains("over 30 bytes")));
        assert_eq!(events("data: \u{e9}\n\n", 20), Ok(vec![ev("", "\u{e9}", None)]));
        let bad: &[u8] = b"data: \xff\n\n";
        assert!(SseReader::new(bad, 20).next_event().is_err());
    }
}
