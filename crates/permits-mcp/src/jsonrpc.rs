//! JSON-RPC 2.0 over stdio as MCP frames it: one message per line (UTF-8, no embedded newline), in both
//! directions. [`FrameReader`] reads lines with a size limit; [`parse`] turns one into a [`Message`] or a
//! [`Malformed`] answer; [`Writer`] writes whole lines from any thread.

use std::io::{self, BufRead, Write};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};

/// The largest frame read, in bytes (16 MiB): a longer line is skipped and answered with an error.
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// Invalid JSON was received.
pub const PARSE_ERROR: i64 = -32700;
/// The JSON sent is not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// The method does not exist or is not available.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Invalid method parameters.
pub const INVALID_PARAMS: i64 = -32602;
/// An internal error (here: the upstream server failed or the approval service could not be reached).
pub const INTERNAL_ERROR: i64 = -32603;

/// One JSON-RPC message.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    /// A request: it has an id and wants an answer.
    Request {
        /// The id (a string or a number), as sent.
        id: Value,
        /// The method.
        method: String,
        /// The parameters (an object or an array), or `None`.
        params: Option<Value>,
    },
    /// A notification: no id, no answer.
    Notification {
        /// The method.
        method: String,
        /// The parameters, or `None`.
        params: Option<Value>,
    },
    /// A response: a result or an error for an earlier request.
    Response {
        /// The id of the request answered.
        id: Value,
        /// `Ok(result)` or `Err(error object)`.
        outcome: Result<Value, Value>,
    },
}

impl Message {
    /// The message as it goes on stdio: its JSON ([`Message::to_value`]) on one line, newline included.
    pub fn to_line(&self) -> String {
        let mut line = self.to_value().to_string();
        line.push('\n');
        line
    }

    /// The message as a JSON value (`"jsonrpc": "2.0"` included).
    pub fn to_value(&self) -> Value {
        match self {
            Message::Request { id, method, params } => {
                let mut m = Map::new();
                m.insert("jsonrpc".into(), json!("2.0"));
                m.insert("id".into(), id.clone());
                m.insert("method".into(), json!(method));
                if let Some(p) = params {
                    m.insert("params".into(), p.clone());
                }
                Value::Object(m)
            }
            Message::Notification { method, params } => {
                let mut m = Map::new();
                m.insert("jsonrpc".into(), json!("2.0"));
                m.insert("method".into(), json!(method));
                if let Some(p) = params {
                    m.insert("params".into(), p.clone());
                }
                Value::Object(m)
            }
            Message::Response { id, outcome: Ok(result) } => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Message::Response { id, outcome: Err(error) } => json!({"jsonrpc": "2.0", "id": id, "error": error}),
        }
    }
}

/// A JSON-RPC error object: `{"code", "message"}`.
pub fn error_object(code: i64, message: impl Into<String>) -> Value {
    json!({"code": code, "message": message.into()})
}

/// An error response to `id`.
pub fn error_response(id: Value, code: i64, message: impl Into<String>) -> Message {
    Message::Response { id, outcome: Err(error_object(code, message)) }
}

/// A frame that is not a JSON-RPC message: the error response to send back (id `null` when none could be
/// read), or nothing when the frame was a response the peer need not hear about.
#[derive(Clone, Debug, PartialEq)]
pub struct Malformed {
    /// The error response to send, when the frame deserves one.
    pub answer: Option<Message>,
    /// What was wrong, for the log.
    pub why: String,
}

fn malformed(id: Value, code: i64, why: impl Into<String>) -> Malformed {
    let why = why.into();
    Malformed { answer: Some(error_response(id, code, why.clone())), why }
}

/// Reads one frame's text as a JSON-RPC 2.0 message.
///
/// Errors: [`Malformed`] with a `-32700` answer for text that is not JSON, `-32600` for JSON that is not a
/// single message object (a batch, a missing or wrong `jsonrpc`, a method that is not a string, an id that is
/// neither a string nor a number); a response with neither result nor error is dropped without an answer.
pub fn parse(text: &str) -> Result<Message, Malformed> {
    let value: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return Err(malformed(Value::Null, PARSE_ERROR, format!("parse error: {e}"))),
    };
    let Value::Object(mut map) = value else {
        let what = if value.is_array() { "a batch (JSON-RPC batches are not part of MCP)" } else { "not an object" };
        return Err(malformed(Value::Null, INVALID_REQUEST, format!("invalid request: {what}")));
    };
    let id = map.remove("id");
    let id_ok = matches!(&id, None | Some(Value::String(_)) | Some(Value::Number(_)));
    let echo = if id_ok { id.clone().unwrap_or(Value::Null) } else { Value::Null };
    if map.get("jsonrpc") != Some(&json!("2.0")) {
        return Err(malformed(echo, INVALID_REQUEST, "invalid request: `jsonrpc` must be \"2.0\""));
    }
    if !id_ok {
        return Err(malformed(Value::Null, INVALID_REQUEST, "invalid request: an id is a string or a number"));
    }
    let params = map.remove("params");
    if params.as_ref().is_some_and(|p| !p.is_object() && !p.is_array()) {
        return Err(malformed(echo, INVALID_REQUEST, "invalid request: `params` must be an object or an array"));
    }
    match map.remove("method") {
        Some(Value::String(method)) => Ok(match id {
            Some(id) => Message::Request { id, method, params },
            None => Message::Notification { method, params },
        }),
        Some(_) => Err(malformed(echo, INVALID_REQUEST, "invalid request: `method` must be a string")),
        None => {
            let Some(id) = id else {
                return Err(malformed(Value::Null, INVALID_REQUEST, "invalid request: no method and no id"));
            };
            match (map.remove("result"), map.remove("error")) {
                (Some(result), None) => Ok(Message::Response { id, outcome: Ok(result) }),
                (None, Some(error)) => Ok(Message::Response { id, outcome: Err(error) }),
                _ => Err(Malformed { answer: None, why: "a response needs exactly one of result and error".into() }),
            }
        }
    }
}

/// One frame as read: its text, or that it was too long (skipped up to its newline).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    /// A line's text, without its newline (and without a `\r` before it).
    Text(String),
    /// A line longer than the limit; its bytes were read and dropped.
    TooLong(usize),
    /// A line that is not UTF-8.
    NotUtf8,
}

/// Reads newline-delimited frames with a size limit, so a peer cannot make the reader hold an unbounded line.
pub struct FrameReader<R> {
    inner: R,
    limit: usize,
}

impl<R: BufRead> FrameReader<R> {
    /// A reader of frames of at most `limit` bytes.
    pub fn new(inner: R, limit: usize) -> FrameReader<R> {
        FrameReader { inner, limit }
    }

    /// The next frame; `Ok(None)` at the end of the stream. Blank lines are skipped.
    ///
    /// Errors: the underlying read's.
    pub fn next_frame(&mut self) -> io::Result<Option<Frame>> {
        loop {
            let mut line = Vec::new();
            let mut total = 0usize;
            let mut overflow = false;
            loop {
                let buf = self.inner.fill_buf()?;
                if buf.is_empty() {
                    if total == 0 {
                        return Ok(None);
                    }
                    break;
                }
                let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
                    Some(i) => (&buf[..i], Some(i + 1)),
                    None => (buf, None),
                };
                total += chunk.len();
                if !overflow {
                    if total > self.limit {
                        overflow = true;
                        line = Vec::new();
                    } else {
                        line.extend_from_slice(chunk);
                    }
                }
                let used = done.unwrap_or(buf.len());
                self.inner.consume(used);
                if done.is_some() {
                    total += 1;
                    break;
                }
            }
            if overflow {
                return Ok(Some(Frame::TooLong(total)));
            }
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return Ok(Some(match String::from_utf8(line) {
                Ok(text) => Frame::Text(text),
                Err(_) => Frame::NotUtf8,
            }));
        }
    }
}

/// Writes whole messages, one per line, from any thread (a clone shares the stream).
#[derive(Clone)]
pub struct Writer {
    inner: Arc<Mutex<Box<dyn Write + Send>>>,
}

impl Writer {
    /// A writer on `w` (stdout, a child's stdin).
    pub fn new(w: impl Write + Send + 'static) -> Writer {
        Writer { inner: Arc::new(Mutex::new(Box::new(w))) }
    }

    /// Writes `message` and a newline, and flushes.
    ///
    /// Errors: the write's (a closed pipe); a poisoned lock is an error too.
    pub fn send(&self, message: &Message) -> io::Result<()> {
        let text = message.to_line();
        let mut w = self.inner.lock().map_err(|_| io::Error::other("the writer's lock is poisoned"))?;
        w.write_all(text.as_bytes())?;
        w.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(input: &[u8], limit: usize) -> Vec<Frame> {
        let mut r = FrameReader::new(input, limit);
        let mut out = Vec::new();
        while let Ok(Some(f)) = r.next_frame() {
            out.push(f);
        }
        out
    }

    #[test]
    fn frames_are_lines_with_a_limit() {
        assert_eq!(
            frames(b"{\"a\":1}\n\n  \r\n{\"b\":2}\r\nlast", 100),
            vec![Frame::Text("{\"a\":1}".into()), Frame::Text("{\"b\":2}".into()), Frame::Text("last".into())]
        );
        let long = [b"x".repeat(50), b"\nok\n".to_vec()].concat();
        assert_eq!(frames(&long, 10), vec![Frame::TooLong(51), Frame::Text("ok".into())]);
        assert_eq!(frames(b"\xff\xfe\nok\n", 10), vec![Frame::NotUtf8, Frame::Text("ok".into())]);
        assert_eq!(frames(b"", 10), vec![]);
    }

    #[test]
    fn a_long_frame_across_small_reads_is_skipped_whole() {
        let text = [b"y".repeat(10_000), b"\n{}\n".to_vec()].concat();
        let reader = io::BufReader::with_capacity(7, &text[..]);
        let mut r = FrameReader::new(reader, 100);
        assert_eq!(r.next_frame().ok().flatten(), Some(Frame::TooLong(10_001)));
        assert_eq!(r.next_frame().ok().flatten(), Some(Frame::Text("{}".into())));
        assert_eq!(r.next_frame().ok().flatten(), None);
    }

    #[test]
    fn messages_parse_and_print() {
        let req = parse(r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}"#);
        assert_eq!(req, Ok(Message::Request { id: json!(7), method: "tools/list".into(), params: Some(json!({})) }));
        let note = parse(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert_eq!(note, Ok(Message::Notification { method: "notifications/initialized".into(), params: None }));
        let ok = parse(r#"{"jsonrpc":"2.0","id":"a","result":{"x":1}}"#);
        assert_eq!(ok, Ok(Message::Response { id: json!("a"), outcome: Ok(json!({"x": 1})) }));
        let err = parse(r#"{"jsonrpc":"2.0","id":"a","error":{"code":-1,"message":"m"}}"#);
        assert_eq!(err, Ok(Message::Response { id: json!("a"), outcome: Err(json!({"code": -1, "message": "m"})) }));
        let printed = Message::Request { id: json!(1), method: "ping".into(), params: None }.to_value();
        assert_eq!(printed, json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}));
    }

    fn code_of(text: &str) -> Option<(Value, i64)> {
        match parse(text) {
            Err(Malformed { answer: Some(Message::Response { id, outcome: Err(e) }), .. }) => {
                Some((id, e.get("code").and_then(Value::as_i64).unwrap_or(0)))
            }
            _ => None,
        }
    }

    #[test]
    fn malformed_frames_get_the_right_error() {
        assert_eq!(code_of("{not json"), Some((Value::Null, PARSE_ERROR)));
        assert_eq!(code_of("[1,2]"), Some((Value::Null, INVALID_REQUEST)));
        assert_eq!(code_of("42"), Some((Value::Null, INVALID_REQUEST)));
        assert_eq!(code_of(r#"{"id":3,"method":"ping"}"#), Some((json!(3), INVALID_REQUEST)));
        assert_eq!(code_of(r#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#), Some((json!(3), INVALID_REQUEST)));
        assert_eq!(code_of(r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#), Some((Value::Null, INVALID_REQUEST)));
        assert_eq!(code_of(r#"{"jsonrpc":"2.0","id":4,"method":5}"#), Some((json!(4), INVALID_REQUEST)));
        assert_eq!(code_of(r#"{"jsonrpc":"2.0","id":4,"method":"x","params":3}"#), Some((json!(4), INVALID_REQUEST)));
        assert_eq!(code_of(r#"{"jsonrpc":"2.0"}"#), Some((Value::Null, INVALID_REQUEST)));
        assert!(matches!(parse(r#"{"jsonrpc":"2.0","id":1}"#), Err(Malformed { answer: None, .. })));
    }
}
