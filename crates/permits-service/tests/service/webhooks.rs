//! Webhook deliveries against real receivers on loopback: a failure (a 5xx, no connection) is tried again
//! with backoff, a bounded number of times; a refusal (4xx) is not; a request never waits for a webhook;
//! and no attempt carries an argument value.

use std::time::{Duration, Instant};

use super::R;
use super::inbox::{Receiver, propose_for_mia, workshop};

#[test]
fn a_failed_delivery_is_retried_with_backoff_and_a_refused_one_is_not() -> R {
    // Fails twice (503) then takes it; always 503; refuses (400); nothing listening at all.
    let (flaky, down, refusing) =
        (Receiver::failing(2, 503), Receiver::failing(usize::MAX, 503), Receiver::failing(1, 400));
    let closed = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let hooks = [
        format!("person:Noor={}/flaky", flaky.url),
        format!("person:Noor={}/down", down.url),
        format!("person:Noor={}/refusing", refusing.url),
        format!("person:Noor=http://{closed}/closed"),
    ];
    let dir = super::Temp::new("webhook-retries-log");
    let log = dir.path("stderr.log");
    let args: Vec<&str> = hooks.iter().flat_map(|h| ["--webhook", h.as_str()]).collect();
    let (server, _dir) = workshop(&args, Some(&log));
    let host = server.host("Estimator");
    let started = Instant::now();
    propose_for_mia(&host, "k1", 45, "pads and a cable", "Ticket T-7");
    // The call does not wait for the deliveries (the first retry alone waits 1 s).
    assert!(started.elapsed() < Duration::from_millis(900), "the call took {:?}", started.elapsed());
    // 1 + 2 + 4 s of backoff: every delivery is over after 7 s and a little.
    let flaky_got = flaky.after(3);
    let down_got = down.after(4);
    let refusing_got = refusing.after(1);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(flaky.after(3).len(), 3, "{flaky_got:?}");
    assert_eq!(down.after(4).len(), 4, "{down_got:?}");
    assert_eq!(refusing.after(1).len(), 1, "{refusing_got:?}");
    assert!(started.elapsed() >= Duration::from_secs(7), "the backoff was shorter: {:?}", started.elapsed());
    // Every attempt is the same body, without an argument value.
    let first = &flaky_got[0].1;
    assert_eq!(first["proposal"], "P-1");
    for (path, body) in flaky_got.iter().chain(&down_got).chain(&refusing_got) {
        assert_eq!(body, first, "{path}");
        // The inbox link holds the server's random port, which may contain `45`: not an argument value.
        let text = body.to_string().replace(&server.url, "");
        for value in ["T-7", "45", "Ticket", "pads"] {
            assert!(!text.contains(value), "the notification carries `{value}`: {text}");
        }
    }
    drop(server);
    let logged = std::fs::read_to_string(&log)?;
    let lines = |needle: &str| logged.lines().filter(|l| l.contains(needle)).count();
    assert_eq!(lines("answered 503 for P-1 (attempt"), 2 + 4, "{logged}");
    assert_eq!(lines("answered 503 for P-1 (attempt 4 of 4): given up"), 1, "{logged}");
    assert_eq!(lines("answered 400 for P-1: not tried again"), 1, "{logged}");
    assert_eq!(lines("failed for P-1: cannot connect"), 4, "{logged}");
    assert_eq!(lines("(attempt 4 of 4): given up"), 2, "{logged}");
    // The log names the target, never the URL (it may hold a token).
    for url in [&flaky.url, &down.url, &refusing.url] {
        assert!(!logged.contains(url.as_str()), "{logged}");
    }
    assert!(!logged.contains(&closed.to_string()), "{logged}");
    Ok(())
}
