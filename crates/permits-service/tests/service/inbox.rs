//! The inbox over plain HTTP (no browser): every page refuses an unauthenticated request, one person cannot
//! act as another (ids in URLs and forms, tampered cookies), CSRF tokens are checked, sign-in is
//! throttled, no password or session id reaches a log line or the audit, and invisible characters are
//! visible on the page. The browser tests (`browser.rs`) drive the same pages in Chromium.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use super::{Client, R, Server, permitd};

/// Noor's and Mia's inbox passwords in these tests.
pub(super) const NOOR_PASSWORD: &str = "noor-secret-password-1";
pub(super) const MIA_PASSWORD: &str = "mia-secret-password-22";

/// `permitd people set-password --store STORE PERSON`, the password on stdin. Returns its stderr.
pub(super) fn set_password(store: &Path, person: &str, password: &str) -> String {
    let mut child = permitd()
        .args(["people", "set-password", "--store"])
        .arg(store)
        .arg(person)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("permitd people set-password");
    if let Some(mut stdin) = child.stdin.take() {
        writeln!(stdin, "{password}").expect("the password on stdin");
    }
    let out = child.wait_with_output().expect("permitd people set-password");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "set-password: {stderr}");
    stderr
}

/// The workshop with passwords for Noor and Mia.
pub(super) fn workshop(more: &[&str], log: Option<&Path>) -> (Server, super::Temp) {
    let dir = super::Temp::new("inbox");
    let table = dir.path("table.json");
    std::fs::copy(super::fixture("workshop"), &table).expect("the workshop fixture");
    let store = dir.path("ledger.db");
    set_password(&store, "Noor", NOOR_PASSWORD);
    set_password(&store, "Mia", MIA_PASSWORD);
    (Server::logged(&table, &store, more, log), dir)
}

/// The estimator proposes `SetPrice` of repair T-7 at `price` for Mia in skill `PriceFleetRepair`, which
/// routes it to Noor: the proposal.
pub(super) fn propose_for_mia(host: &Client, key: &str, price: i64, why: &str, shown: &str) -> Value {
    let answer = host
        .post(
            "/v1/calls",
            &json!({"agent": "Estimator", "skill": "PriceFleetRepair", "tool": "SetPrice",
                "arguments": {"repair": "T-7", "price": price}, "requester": "Mia", "operation_key": key,
                "claim_token": format!("{key}-price"), "why": why, "covered_version": "r1",
                "shown": {"repair": shown}}),
        )
        .ok();
    assert_eq!(answer["outcome"], "proposed", "{answer}");
    answer["proposal"].clone()
}

/// A browser without a browser: cookies kept by hand, redirects not followed.
pub(super) struct Web {
    base: String,
    agent: ureq::Agent,
    pub(super) cookies: BTreeMap<String, String>,
    /// Headers sent with every request (a single sign-on proxy's, in `sign_in.rs`).
    pub(super) headers: Vec<(String, String)>,
}

/// An answer: status, `Location`, body.
#[derive(Debug)]
pub(super) struct Page {
    pub(super) status: u16,
    pub(super) location: Option<String>,
    pub(super) body: String,
    pub(super) set_cookies: Vec<String>,
}

impl Page {
    /// The value of the first hidden `csrf` field.
    pub(super) fn csrf(&self) -> String {
        field(&self.body, "csrf").unwrap_or_default()
    }
}

/// The value of the first `<input … name="NAME" value="…">` in `html`.
pub(super) fn field(html: &str, name: &str) -> Option<String> {
    let at = html.find(&format!("name=\"{name}\" value=\""))?;
    let rest = &html[at + name.len() + 15..];
    Some(rest[..rest.find('"')?].to_string())
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl Web {
    pub(super) fn new(base: &str) -> Web {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_global(Some(Duration::from_secs(60)))
            .proxy(None)
            // A new connection per request: the server may close one after answering a form it refused
            // without reading its body, and a pooled connection it closed fails the next request
            // ("Peer disconnected"), which is the client's race, not the service's answer.
            .max_idle_connections(0)
            .build()
            .into();
        Web::with_agent(base, agent)
    }

    /// A browser on this agent (one that trusts a test's TLS certificate, in `sign_in.rs`).
    pub(super) fn with_agent(base: &str, agent: ureq::Agent) -> Web {
        Web { base: base.to_string(), agent, cookies: BTreeMap::new(), headers: Vec::new() }
    }

    fn cookie_header(&self) -> String {
        self.cookies.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("; ")
    }

    fn page(&mut self, response: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Page {
        let mut response = response.expect("an answer");
        let status = response.status().as_u16();
        let location = response.headers().get("location").and_then(|v| v.to_str().ok()).map(str::to_string);
        let mut set_cookies = Vec::new();
        for v in response.headers().get_all("set-cookie") {
            let Ok(v) = v.to_str() else { continue };
            set_cookies.push(v.to_string());
            let pair = v.split(';').next().unwrap_or_default();
            if let Some((name, value)) = pair.split_once('=') {
                if value.is_empty() || v.contains("Max-Age=0") {
                    self.cookies.remove(name);
                } else {
                    self.cookies.insert(name.to_string(), value.to_string());
                }
            }
        }
        let body = response.body_mut().read_to_string().unwrap_or_default();
        Page { status, location, body, set_cookies }
    }

    pub(super) fn get(&mut self, path: &str) -> Page {
        let mut request = self.agent.get(format!("{}{path}", self.base));
        if !self.cookies.is_empty() {
            request = request.header("cookie", self.cookie_header());
        }
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        let response = request.call();
        self.page(response)
    }

    pub(super) fn post(&mut self, path: &str, fields: &[(&str, &str)]) -> Page {
        let body = fields.iter().map(|(k, v)| format!("{}={}", encode(k), encode(v))).collect::<Vec<_>>().join("&");
        let mut request =
            self.agent.post(format!("{}{path}", self.base)).header("content-type", "application/x-www-form-urlencoded");
        if !self.cookies.is_empty() {
            request = request.header("cookie", self.cookie_header());
        }
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        let response = request.send(body.as_bytes());
        self.page(response)
    }

    /// Signs in as `person`: the answer to the sign-in's POST.
    pub(super) fn sign_in(&mut self, person: &str, password: &str) -> Page {
        let form = self.get("/inbox/sign-in");
        assert_eq!(form.status, 200, "{}", form.body);
        self.post("/inbox/sign-in", &[("csrf", &form.csrf()), ("person", person), ("password", password)])
    }
}

#[test]
fn every_inbox_page_refuses_an_unauthenticated_request() -> R {
    let (server, _dir) = workshop(&[], None);
    let host = server.host("Estimator");
    propose_for_mia(&host, "k1", 45, "pads and a cable", "Ticket T-7");
    let gets =
        ["/inbox/waiting", "/inbox/proposals/P-1", "/inbox/rules", "/inbox/history", "/inbox/tables", "/inbox/totp"];
    let posts = [
        "/inbox/totp",
        "/inbox/proposals/P-1/approve",
        "/inbox/proposals/P-1/reject",
        "/inbox/rules/R-1/revoke",
        "/inbox/sign-out",
    ];
    let random = "ab".repeat(32);
    for cookie in [None, Some(random.as_str()), Some("not-a-session"), Some("")] {
        let mut web = Web::new(&server.url);
        if let Some(c) = cookie {
            web.cookies.insert("permits_session".into(), c.into());
        }
        for path in gets {
            let page = web.get(path);
            assert_eq!(page.status, 303, "{path} with {cookie:?}: {}", page.body);
            let to = page.location.unwrap_or_default();
            assert!(to.starts_with("/inbox/sign-in?next=%2F") || to.starts_with("/inbox/sign-in?next=/"), "{to}");
        }
        for path in posts {
            let page = web.post(path, &[("csrf", "x"), ("fingerprint", "f"), ("how", "once"), ("reason", "no")]);
            assert_eq!(page.status, 403, "{path} with {cookie:?}: {}", page.body);
            assert!(page.body.contains("needs a signed-in person"), "{}", page.body);
        }
    }
    // Nothing was decided.
    assert_eq!(host.get("/v1/proposals/P-1").ok()["status"], "waiting");
    Ok(())
}

#[test]
fn a_session_cookie_is_http_only_strict_and_its_id_is_stored_only_as_a_digest() -> R {
    let (server, _dir) = workshop(&[], None);
    let mut web = Web::new(&server.url);
    let signed = web.sign_in("Noor", NOOR_PASSWORD);
    assert_eq!((signed.status, signed.location.as_deref()), (303, Some("/inbox/waiting")), "{}", signed.body);
    let cookie = signed.set_cookies.iter().find(|c| c.starts_with("permits_session=")).ok_or("no session cookie")?;
    // Plain HTTP without `--secure-cookies`: not `Secure` (a browser would not send it back).
    assert!(cookie.ends_with("; HttpOnly; SameSite=Strict; Path=/; Max-Age=43200"), "{cookie}");
    let id = web.cookies.get("permits_session").cloned().ok_or("no session")?;
    assert_eq!(id.len(), 64);
    let db = rusqlite::Connection::open(&server.store)?;
    let (digest, person): (String, String) =
        db.query_row("SELECT digest, person FROM service_sessions", [], |r| Ok((r.get(0)?, r.get(1)?)))?;
    assert_eq!(person, "Noor");
    assert_ne!(digest, id);
    let phc: String = db.query_row("SELECT phc FROM service_passwords WHERE person = 'Noor'", [], |r| r.get(0))?;
    assert!(phc.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{phc}");
    // Signed in, the pages answer; signed out, the same cookie is refused.
    let page = web.get("/inbox/waiting");
    assert_eq!(page.status, 200);
    let csrf = page.csrf();
    assert_eq!(web.post("/inbox/sign-out", &[("csrf", &csrf)]).status, 303);
    let mut replay = Web::new(&server.url);
    replay.cookies.insert("permits_session".into(), id);
    assert_eq!(replay.get("/inbox/waiting").status, 303);
    // Behind a TLS proxy, `--secure-cookies` marks them `Secure`.
    let (proxied, _dir) = workshop(&["--secure-cookies"], None);
    let signed = Web::new(&proxied.url).sign_in("Noor", NOOR_PASSWORD);
    let cookie = signed.set_cookies.iter().find(|c| c.starts_with("permits_session=")).ok_or("no session cookie")?;
    assert!(cookie.ends_with("; HttpOnly; SameSite=Strict; Path=/; Max-Age=43200; Secure"), "{cookie}");
    Ok(())
}

#[test]
fn one_person_cannot_act_as_another() -> R {
    let (server, _dir) = workshop(&[], None);
    let host = server.host("Estimator");
    let p = propose_for_mia(&host, "k1", 45, "pads and a cable", "Ticket T-7");
    let fingerprint = p["fingerprint"].as_str().ok_or("fingerprint")?;
    let (mut mia, mut noor) = (Web::new(&server.url), Web::new(&server.url));
    assert_eq!(mia.sign_in("Mia", MIA_PASSWORD).status, 303);
    assert_eq!(noor.sign_in("Noor", NOOR_PASSWORD).status, 303);
    let mia_csrf = mia.get("/inbox/proposals/P-1").csrf();
    let noor_csrf = noor.get("/inbox/proposals/P-1").csrf();
    assert_ne!(mia_csrf, noor_csrf);
    // Mia, with her own session and token, naming Noor in the form: refused as the API refuses her.
    let api = server.person("Mia").post("/v1/proposals/P-1/approve", &json!({"fingerprint": fingerprint}));
    assert_eq!(api.status, 403);
    let page = mia.post(
        "/inbox/proposals/P-1/approve",
        &[("csrf", &mia_csrf), ("fingerprint", fingerprint), ("how", "once"), ("person", "Noor")],
    );
    assert_eq!(page.status, 403, "{}", page.body);
    let refusal = api.message().replace('`', "&#96;");
    assert!(
        page.body.contains(api.message()) || page.body.contains(&refusal),
        "the page does not give the API's refusal `{}`: {}",
        api.message(),
        page.body
    );
    // Noor's session with Mia's token, and Mia's session with Noor's: refused before anything is read.
    let swapped = noor
        .post("/inbox/proposals/P-1/approve", &[("csrf", &mia_csrf), ("fingerprint", fingerprint), ("how", "once")]);
    assert_eq!(swapped.status, 403);
    assert!(swapped.body.contains("CSRF"), "{}", swapped.body);
    let swapped = mia
        .post("/inbox/proposals/P-1/approve", &[("csrf", &noor_csrf), ("fingerprint", fingerprint), ("how", "once")]);
    assert_eq!(swapped.status, 403);
    // A form without its token at all.
    let bare = noor.post("/inbox/proposals/P-1/approve", &[("fingerprint", fingerprint), ("how", "once")]);
    assert_eq!(bare.status, 403);
    assert!(bare.body.contains("CSRF"), "{}", bare.body);
    // A tampered cookie: Noor's id with one digit changed is nobody.
    let id = noor.cookies.get("permits_session").cloned().ok_or("session")?;
    let flipped: String =
        id.chars().enumerate().map(|(i, c)| if i == 0 { if c == '0' { '1' } else { '0' } } else { c }).collect();
    let mut forged = Web::new(&server.url);
    forged.cookies.insert("permits_session".into(), flipped);
    let page = forged
        .post("/inbox/proposals/P-1/approve", &[("csrf", &noor_csrf), ("fingerprint", fingerprint), ("how", "once")]);
    assert_eq!(page.status, 403);
    assert_eq!(host.get("/v1/proposals/P-1").ok()["status"], "waiting");
    // Noor, properly: granted, by her.
    let done = noor
        .post("/inbox/proposals/P-1/approve", &[("csrf", &noor_csrf), ("fingerprint", fingerprint), ("how", "once")]);
    assert_eq!((done.status, done.location.as_deref()), (303, Some("/inbox/proposals/P-1")), "{}", done.body);
    let after = host.get("/v1/proposals/P-1").ok();
    assert_eq!((&after["status"], &after["decided_by"]), (&json!("granted"), &json!("Noor")));
    Ok(())
}

#[test]
fn sign_in_is_throttled_per_person_and_per_address() -> R {
    let (server, _dir) = workshop(&[], None);
    let mut web = Web::new(&server.url);
    for _ in 0..5 {
        let page = web.sign_in("Noor", "a wrong password!");
        assert_eq!(page.status, 401, "{}", page.body);
        assert!(page.body.contains("do not match"));
    }
    // The sixth, with the right password: refused without being checked.
    let page = web.sign_in("Noor", NOOR_PASSWORD);
    assert_eq!(page.status, 429, "{}", page.body);
    assert!(page.body.contains("too many failed sign-ins"), "{}", page.body);
    assert!(!web.cookies.contains_key("permits_session"));
    // Another person from the same address still signs in (5 failures are under the address's 20)...
    assert_eq!(Web::new(&server.url).sign_in("Mia", MIA_PASSWORD).status, 303);
    // ...until the address has failed 20 times.
    for n in 0..15 {
        assert_eq!(web.sign_in(&format!("Nobody{n}"), "a wrong password!").status, 401);
    }
    assert_eq!(Web::new(&server.url).sign_in("Mia", MIA_PASSWORD).status, 429);
    Ok(())
}

#[test]
fn a_sign_in_form_without_its_token_is_refused() -> R {
    let (server, _dir) = workshop(&[], None);
    let mut web = Web::new(&server.url);
    let form = web.get("/inbox/sign-in");
    let page = web.post("/inbox/sign-in", &[("person", "Noor"), ("password", NOOR_PASSWORD)]);
    assert_eq!(page.status, 403, "{}", page.body);
    let page =
        web.post("/inbox/sign-in", &[("csrf", &"0".repeat(64)), ("person", "Noor"), ("password", NOOR_PASSWORD)]);
    assert_eq!(page.status, 403);
    // The token without its cookie (another browser) is refused too.
    let mut other = Web::new(&server.url);
    let page = other.post("/inbox/sign-in", &[("csrf", &form.csrf()), ("person", "Noor"), ("password", NOOR_PASSWORD)]);
    assert_eq!(page.status, 403);
    assert!(!other.cookies.contains_key("permits_session"));
    Ok(())
}

#[test]
fn no_password_or_session_id_reaches_a_log_line_or_the_audit() -> R {
    let dir = super::Temp::new("inbox-log");
    let log = dir.path("permitd.log");
    let (server, _store_dir) = workshop(&[], Some(&log));
    let said = set_password(&server.store, "Riley", "riley-secret-password");
    assert!(!said.contains("riley-secret-password"), "{said}");
    let host = server.host("Estimator");
    let p = propose_for_mia(&host, "k1", 45, "pads and a cable", "Ticket T-7");
    let mut noor = Web::new(&server.url);
    noor.sign_in("Noor", "a wrong password!");
    assert_eq!(noor.sign_in("Noor", NOOR_PASSWORD).status, 303);
    let page = noor.get("/inbox/proposals/P-1");
    let fingerprint = p["fingerprint"].as_str().ok_or("fingerprint")?;
    let done = noor
        .post("/inbox/proposals/P-1/approve", &[("csrf", &page.csrf()), ("fingerprint", fingerprint), ("how", "once")]);
    assert_eq!(done.status, 303, "{}", done.body);
    let session = noor.cookies.get("permits_session").cloned().ok_or("session")?;
    server.signal("TERM");
    std::thread::sleep(Duration::from_millis(500));
    let mut audit_path = server.store.as_os_str().to_owned();
    audit_path.push(".audit.jsonl");
    let audit = std::fs::read_to_string(&audit_path)?;
    assert!(audit.contains("\"Noor\""), "the audit has Noor's approval: {audit}");
    let logged = std::fs::read_to_string(&log)?;
    let db = std::fs::read(&server.store)?;
    let db = String::from_utf8_lossy(&db);
    for secret in [NOOR_PASSWORD, MIA_PASSWORD, "a wrong password!", "riley-secret-password", session.as_str()] {
        assert!(!logged.contains(secret), "the log has `{secret}`: {logged}");
        assert!(!audit.contains(secret), "the audit has `{secret}`");
        assert!(!db.contains(secret), "the store has `{secret}`");
    }
    Ok(())
}

#[test]
fn invisible_characters_are_visible_on_the_proposal_page() -> R {
    let (server, _dir) = workshop(&[], None);
    let host = server.host("Estimator");
    propose_for_mia(&host, "k1", 45, "pads\u{202e}lebac a\u{200b}nd", "Ticket\u{200b} T-7\u{202e}");
    let mut noor = Web::new(&server.url);
    noor.sign_in("Noor", NOOR_PASSWORD);
    let page = noor.get("/inbox/proposals/P-1");
    assert_eq!(page.status, 200);
    let esc = "<span class=\"esc\" title=\"an invisible character, shown as its code point\">";
    assert!(
        page.body.contains(&format!("pads{esc}\\u{{202e}}</span>lebac a{esc}\\u{{200b}}</span>nd")),
        "{}",
        page.body
    );
    assert!(page.body.contains(&format!("Ticket{esc}\\u{{200b}}</span> T-7{esc}\\u{{202e}}</span>")), "{}", page.body);
    assert!(!page.body.contains('\u{202e}') && !page.body.contains('\u{200b}'), "a raw invisible character");
    // And the page is for a phone: the viewport is declared, and no script runs.
    assert!(page.body.contains("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"));
    assert!(!page.body.contains("<script"));
    Ok(())
}

/// The text of the element with this id in `html` (no nested elements).
pub(super) fn text_of(html: &str, id: &str) -> Option<String> {
    let at = html.find(&format!("id=\"{id}\">"))? + id.len() + 6;
    Some(html[at..].split('<').next()?.to_string())
}

/// The TOTP code of a base-32 secret for the step `ahead` steps from now.
pub(super) fn totp_code(secret: &str, ahead: u64) -> String {
    use permits_service::people::totp;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    totp::code(&totp::from_base32(secret).unwrap_or_default(), now / totp::STEP + ahead)
}

#[test]
fn a_second_factor_is_added_then_asked_for_and_each_code_is_taken_once() -> R {
    let dir = super::Temp::new("inbox-totp-log");
    let log = dir.path("permitd.log");
    let (server, _store_dir) = workshop(&[], Some(&log));
    let mut noor = Web::new(&server.url);
    assert_eq!(noor.sign_in("Noor", NOOR_PASSWORD).status, 303);
    let page = noor.get("/inbox/totp");
    assert_eq!(page.status, 200);
    let secret = text_of(&page.body, "totp-secret").ok_or("no secret on the page")?;
    assert_eq!(secret.len(), 32, "20 bytes in base 32: {secret}");
    let uri = text_of(&page.body, "totp-uri").ok_or("no URI")?;
    assert!(uri.starts_with(&format!("otpauth://totp/permits:Noor?secret={secret}&amp;issuer=permits")), "{uri}");
    // A wrong code does not turn it on; the right one does.
    let wrong = noor.post("/inbox/totp", &[("csrf", &page.csrf()), ("code", "000000")]);
    let wrong = if wrong.status == 200 {
        noor.post("/inbox/totp", &[("csrf", &page.csrf()), ("code", "999999")])
    } else {
        wrong
    };
    assert_eq!(wrong.status, 422, "{}", wrong.body);
    let used = totp_code(&secret, 0);
    let on = noor.post("/inbox/totp", &[("csrf", &page.csrf()), ("code", &used)]);
    assert_eq!(on.status, 200, "{}", on.body);
    assert!(on.body.contains("Your second factor is on"), "{}", on.body);
    assert!(text_of(&noor.get("/inbox/totp").body, "totp-secret").is_none(), "the secret is not shown again");
    // Sign-in now asks for a code: none, a wrong one, the one already used: refused.
    let mut web = Web::new(&server.url);
    for code in ["", "123456", used.as_str()] {
        let form = web.get("/inbox/sign-in");
        let page = web.post(
            "/inbox/sign-in",
            &[("csrf", &form.csrf()), ("person", "Noor"), ("password", NOOR_PASSWORD), ("code", code)],
        );
        if code == "123456" && page.status == 303 {
            continue; // the one chance in a million that it is the code
        }
        assert_eq!(page.status, 401, "code `{code}`: {}", page.body);
        assert!(page.body.contains("one-time code is missing, wrong, or was already used"), "{}", page.body);
    }
    let form = web.get("/inbox/sign-in");
    let next = totp_code(&secret, 1);
    let page = web.post(
        "/inbox/sign-in",
        &[("csrf", &form.csrf()), ("person", "Noor"), ("password", NOOR_PASSWORD), ("code", &next)],
    );
    assert_eq!(page.status, 303, "{}", page.body);
    server.signal("TERM");
    std::thread::sleep(Duration::from_millis(500));
    let logged = std::fs::read_to_string(&log)?;
    let mut audit_path = server.store.as_os_str().to_owned();
    audit_path.push(".audit.jsonl");
    let audit = std::fs::read_to_string(&audit_path)?;
    for secret in [secret.as_str(), used.as_str(), next.as_str()] {
        assert!(!logged.contains(secret), "the log has `{secret}`");
        assert!(!audit.contains(secret), "the audit has `{secret}`");
    }
    Ok(())
}

#[test]
fn with_require_totp_a_person_without_a_second_factor_can_only_add_one() -> R {
    let (server, _dir) = workshop(&["--require-totp"], None);
    let host = server.host("Estimator");
    let p = propose_for_mia(&host, "k1", 45, "pads and a cable", "Ticket T-7");
    let fingerprint = p["fingerprint"].as_str().ok_or("fingerprint")?;
    let mut noor = Web::new(&server.url);
    // Her password signs her in, to her second factor's page and nowhere else.
    let signed = noor.sign_in("Noor", NOOR_PASSWORD);
    assert_eq!((signed.status, signed.location.as_deref()), (303, Some("/inbox/waiting")), "{}", signed.body);
    for path in ["/inbox/waiting", "/inbox/proposals/P-1", "/inbox/rules", "/inbox/history", "/inbox/tables"] {
        let page = noor.get(path);
        assert_eq!((page.status, page.location.as_deref()), (303, Some("/inbox/totp")), "{path}: {}", page.body);
    }
    let enrol = noor.get("/inbox/totp");
    assert_eq!(enrol.status, 200, "{}", enrol.body);
    assert!(enrol.body.contains("requires a second factor"), "{}", enrol.body);
    let csrf = enrol.csrf();
    assert_eq!(csrf.len(), 64, "{}", enrol.body);
    // No decision either, even with her session's own CSRF token.
    for (path, fields) in [
        ("/inbox/proposals/P-1/approve", vec![("csrf", csrf.as_str()), ("fingerprint", fingerprint), ("how", "once")]),
        ("/inbox/proposals/P-1/reject", vec![("csrf", csrf.as_str()), ("reason", "no")]),
        ("/inbox/rules/R-1/revoke", vec![("csrf", csrf.as_str()), ("reason", "no")]),
    ] {
        let refused = noor.post(path, &fields);
        assert_eq!(refused.status, 403, "{path}: {}", refused.body);
        assert!(refused.body.contains("requires a second factor"), "{path}: {}", refused.body);
    }
    assert_eq!(host.get("/v1/proposals/P-1").ok()["status"], "waiting");
    // She adds it; then the inbox is hers, and she approves.
    let secret = text_of(&enrol.body, "totp-secret").ok_or("no secret")?;
    let on = noor.post("/inbox/totp", &[("csrf", &csrf), ("code", &totp_code(&secret, 0))]);
    assert_eq!(on.status, 200, "{}", on.body);
    assert_eq!(noor.get("/inbox/proposals/P-1").status, 200);
    let done =
        noor.post("/inbox/proposals/P-1/approve", &[("csrf", &csrf), ("fingerprint", fingerprint), ("how", "once")]);
    assert_eq!(done.status, 303, "{}", done.body);
    assert_eq!(host.get("/v1/proposals/P-1").ok()["status"], "granted");
    // From now on sign-in asks for the code: her password alone is refused.
    let mut again = Web::new(&server.url);
    let refused = again.sign_in("Noor", NOOR_PASSWORD);
    assert_eq!(refused.status, 401, "{}", refused.body);
    assert!(refused.body.contains("one-time code is missing"), "{}", refused.body);
    assert!(!again.cookies.contains_key("permits_session"));
    let form = again.get("/inbox/sign-in");
    let code = totp_code(&secret, 1);
    let signed = again.post(
        "/inbox/sign-in",
        &[("csrf", &form.csrf()), ("person", "Noor"), ("password", NOOR_PASSWORD), ("code", &code)],
    );
    assert_eq!((signed.status, signed.location.as_deref()), (303, Some("/inbox/waiting")), "{}", signed.body);
    assert_eq!(again.get("/inbox/waiting").status, 200);
    Ok(())
}

/// A webhook receiver on loopback: records each request's path and body, answers 200.
pub(super) struct Receiver {
    pub(super) url: String,
    got: std::sync::Arc<std::sync::Mutex<Vec<(String, Value)>>>,
}

impl Receiver {
    pub(super) fn start() -> Receiver {
        Receiver::failing(0, 200)
    }

    /// A receiver that answers `status` to its first `n` requests (and records them), 200 after.
    pub(super) fn failing(n: usize, status: u16) -> Receiver {
        use std::io::{BufRead, BufReader, Read};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let url = format!("http://{}", listener.local_addr().expect("its address"));
        let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = got.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().expect("the stream"));
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                let path = line.split(' ').nth(1).unwrap_or_default().to_string();
                let mut length = 0;
                loop {
                    let mut header = String::new();
                    if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                        break;
                    }
                    if let Some(v) = header.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                let value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let mut got = record.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                got.push((path, value));
                let answer = if got.len() <= n { status } else { 200 };
                drop(got);
                let _ = stream.write_all(
                    format!("HTTP/1.1 {answer} X\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok").as_bytes(),
                );
            }
        });
        Receiver { url, got }
    }

    /// What arrived, once `n` requests have (or after 10 s), and after a further half second for extras.
    pub(super) fn after(&self, n: usize) -> Vec<(String, Value)> {
        let started = std::time::Instant::now();
        while self.got.lock().map(|g| g.len()).unwrap_or(0) < n && started.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(500));
        self.got.lock().map(|g| g.clone()).unwrap_or_default()
    }
}

#[test]
fn a_webhook_on_loopback_gets_one_notification_per_new_proposal_without_argument_values() -> R {
    let receiver = Receiver::start();
    let (noor_hook, manager_hook) = (format!("{}/noor", receiver.url), format!("{}/managers", receiver.url));
    let hooks = [
        format!("person:Noor={noor_hook}"),
        format!("role:Manager={manager_hook}"),
        format!("person:Mia={}/mia", receiver.url),
    ];
    let args = [
        "--webhook",
        &hooks[0],
        "--webhook",
        &hooks[1],
        "--webhook",
        &hooks[2],
        "--public-url",
        "https://inbox.example",
    ];
    let (server, _dir) = workshop(&args, None);
    let host = server.host("Estimator");
    // Routed to Noor: her webhook, once (the role's is not: it is not routed to the role).
    propose_for_mia(&host, "k1", 45, "pads and a cable", "Ticket T-7");
    // The same call again is the same proposal: nothing new to announce.
    propose_for_mia(&host, "k1", 45, "pads and a cable", "Ticket T-7");
    let got = receiver.after(1);
    assert_eq!(got.len(), 1, "{got:?}");
    let (path, body) = &got[0];
    assert_eq!(path, "/noor");
    assert_eq!(
        body["text"],
        "Estimator asks to “Set the price” (SetPrice, for Mia): waiting on a decision from Noor. Sign in to decide: https://inbox.example/inbox/proposals/P-1"
    );
    assert_eq!(body["blocks"][0]["type"], "section");
    assert_eq!(body["link"], "https://inbox.example/inbox/proposals/P-1");
    let text = body.to_string();
    for value in ["T-7", "45", "Ticket", "pads"] {
        assert!(!text.contains(value), "the notification carries `{value}`: {text}");
    }
    // A new proposal is announced again; one that waits on Mia goes to her webhook only.
    propose_for_mia(&host, "k2", 50, "a wheel", "Ticket T-8");
    let own = host
        .post(
            "/v1/calls",
            &json!({"agent": "Estimator", "skill": "EstimateRepair", "tool": "SetPrice",
                "arguments": {"repair": "T-9", "price": 12}, "requester": "Mia", "operation_key": "k3",
                "claim_token": "k3-price", "covered_version": "r1"}),
        )
        .ok();
    assert_eq!(own["outcome"], "proposed", "{own}");
    let got = receiver.after(3);
    let paths: Vec<&str> = got.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(paths.len(), 3, "{got:?}");
    assert_eq!(paths.iter().filter(|p| **p == "/noor").count(), 2, "{paths:?}");
    assert_eq!(paths.iter().filter(|p| **p == "/mia").count(), 1, "{paths:?}");
    // After a restart, a retried call of an announced proposal is not announced again.
    let (table, store, dir) = server.stop(super::Stop::Term);
    let server = Server::with(&table, &store, &args);
    propose_for_mia(&server.host("Estimator"), "k1", 45, "pads and a cable", "Ticket T-7");
    assert_eq!(receiver.after(4).len(), 3);
    drop(dir);
    Ok(())
}

#[test]
fn approving_for_the_task_or_always_makes_the_rule_shown_on_my_rules_and_only_its_maker_revokes_it() -> R {
    let (server, _dir) = workshop(&[], None);
    let host = server.host("Estimator");
    let (mut noor, mut mia) = (Web::new(&server.url), Web::new(&server.url));
    assert_eq!(noor.sign_in("Noor", NOOR_PASSWORD).status, 303);
    assert_eq!(mia.sign_in("Mia", MIA_PASSWORD).status, 303);
    let decide = |web: &mut Web, id: &str, fields: &[(&str, &str)]| {
        let page = web.get(&format!("/inbox/proposals/{id}"));
        let fingerprint = field(&page.body, "fingerprint").unwrap_or_default();
        let mut all = vec![("csrf", page.csrf()), ("fingerprint", fingerprint)];
        all.extend(fields.iter().map(|(k, v)| (*k, v.to_string())));
        let all: Vec<(&str, &str)> = all.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let action = if fields.iter().any(|(k, _)| *k == "reason") { "reject" } else { "approve" };
        web.post(&format!("/inbox/proposals/{id}/{action}"), &all)
    };
    propose_for_mia(&host, "k1", 45, "pads", "Ticket T-7");
    assert_eq!(decide(&mut noor, "P-1", &[("how", "task"), ("scope", "these")]).status, 303);
    propose_for_mia(&host, "k2", 50, "a wheel", "Ticket T-8");
    assert_eq!(decide(&mut noor, "P-2", &[("how", "always"), ("scope", "any")]).status, 303);
    let rules = host.get("/v1/rules").ok()["rules"].clone();
    let rules = rules.as_array().ok_or("rules")?;
    assert_eq!(rules.len(), 2, "{rules:?}");
    assert_eq!(
        (&rules[0]["task"], &rules[0]["by"], &rules[0]["work_for"]),
        (&json!("k1"), &json!("Noor"), &json!({"person": "Mia"}))
    );
    assert_eq!(rules[0]["scope"], json!({"these_arguments": "{\"price\":45,\"repair\":\"T-7\"}"}), "{}", rules[0]);
    assert_eq!((&rules[1]["scope"], rules[1].get("task")), (&json!("any_arguments"), None), "{}", rules[1]);
    // Her rules page lists both, newest first; Mia's lists none.
    let page = noor.get("/inbox/rules");
    let (r1, r2) = (rules[0]["id"].as_str().ok_or("id")?, rules[1]["id"].as_str().ok_or("id")?);
    let (at1, at2) =
        (page.body.find(&format!("<strong>{r1}</strong>")), page.body.find(&format!("<strong>{r2}</strong>")));
    assert!(at2.is_some() && at1.is_some() && at2 < at1, "{}", page.body);
    assert!(page.body.contains("(a task rule)"), "{}", page.body);
    assert!(mia.get("/inbox/rules").body.contains("You made no standing or task rule."));
    // Mia cannot revoke Noor's rule (the runtime's refusal); Noor can.
    let csrf = mia.get("/inbox/rules").csrf();
    let refused = mia.post(&format!("/inbox/rules/{r2}/revoke"), &[("csrf", &csrf), ("reason", "mine now")]);
    assert_eq!(refused.status, 403, "{}", refused.body);
    let csrf = noor.get("/inbox/rules").csrf();
    assert_eq!(
        noor.post(&format!("/inbox/rules/{r2}/revoke"), &[("csrf", &csrf), ("reason", "too broad")]).status,
        303
    );
    let after = host.get("/v1/rules").ok();
    assert_eq!(after["rules"][1]["revoked"]["by"], "Noor", "{after}");
    // A rejection needs a visible reason, and gives it back to the agent.
    propose_for_mia(&host, "k3", 70, "a frame", "Ticket T-9");
    let blank = decide(&mut noor, "P-3", &[("reason", "\u{200b} ")]);
    assert_eq!(blank.status, 422, "{}", blank.body);
    assert_eq!(decide(&mut noor, "P-3", &[("reason", "Quote the frame separately.")]).status, 303);
    let p = host.get("/v1/proposals/P-3").ok();
    assert_eq!((&p["status"], &p["answer"]), (&json!("rejected"), &json!("rejected: Quote the frame separately.")));
    // History shows how each was decided.
    let history = noor.get("/inbox/history").body;
    assert!(history.contains("3 proposal(s) you asked for or decided."), "{history}");
    assert!(history.contains("approved by Noor"), "{history}");
    // An unknown way to approve is refused, and nothing happens.
    propose_for_mia(&host, "k4", 80, "a chain", "Ticket T-10");
    assert_eq!(decide(&mut noor, "P-4", &[("how", "forever"), ("scope", "any")]).status, 400);
    assert_eq!(host.get("/v1/proposals/P-4").ok()["status"], "waiting");
    Ok(())
}

/// Found by a new user: a person who may decide a proposal but may not widen autonomy was offered "Approve for
/// this task" and "Always like this", which then answered 403. Now the page offers them only where the runtime
/// would make the rule (`Runtime::may_make_rule_from`), and says why not; Noor, who may widen, still gets them.
#[test]
fn rule_choices_are_offered_only_to_a_person_who_may_make_the_rule() -> R {
    let (server, _dir) = workshop(&[], None);
    let host = server.host("Estimator");
    let answer = host
        .post(
            "/v1/calls",
            &json!({"agent": "Estimator", "skill": "EstimateRepair", "tool": "SetPrice",
                "arguments": {"repair": "T-7", "price": 45}, "requester": "Mia", "operation_key": "k-mia",
                "claim_token": "k-mia-price", "why": "the customer asked", "covered_version": "r1"}),
        )
        .ok();
    assert_eq!(answer["outcome"], "proposed", "{answer}");
    let id = answer["proposal"]["id"].as_str().ok_or("no id")?.to_string();
    let mut mia = Web::new(&server.url);
    mia.sign_in("Mia", MIA_PASSWORD);
    let page = mia.get(&format!("/inbox/proposals/{id}"));
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("id=\"approve-once\""), "Mia decides her own estimate: {}", page.body);
    assert!(
        !page.body.contains("id=\"approve-task\"") && !page.body.contains("id=\"approve-always\""),
        "{}",
        page.body
    );
    let why = text_of(&page.body, "no-rules").ok_or("no reason given")?;
    assert!(why.starts_with("Approve once only: "), "{why}");
    propose_for_mia(&host, "k-noor", 45, "fleet price", "Ticket T-7");
    let mut noor = Web::new(&server.url);
    noor.sign_in("Noor", NOOR_PASSWORD);
    let page = noor.get("/inbox/proposals/P-2");
    assert!(page.body.contains("id=\"approve-task\"") && page.body.contains("id=\"approve-always\""), "{}", page.body);
    Ok(())
}

/// An extern tool's effect reads on the proposal page like any tool's: its class, what shows it (for an
/// extern tool, its claim: there is no body) and where, marked assumed — not the claim's own text again
/// (`sends: : sends`).
#[test]
fn an_extern_tools_effects_read_like_any_tools() -> R {
    let dir = super::Temp::new("inbox-extern");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../policies/workshop");
    let pkg = dir.path("workshop");
    std::fs::create_dir_all(&pkg)?;
    for entry in std::fs::read_dir(&src)? {
        let path = entry?.path();
        let text = std::fs::read_to_string(&path)?.replace(
            "tools [PartsFor, NoteRepair, SetPrice, ScrapRepair]",
            "tools [PartsFor, NoteRepair, SetPrice, ScrapRepair, SendQuote]",
        );
        std::fs::write(pkg.join(path.file_name().ok_or("a file name")?), text)?;
    }
    let mut tools = std::fs::read_to_string(pkg.join("tools.permits"))?;
    tools.push_str("\n/// Mails the quote to the customer, by the workshop's mail tool.\n");
    tools.push_str("extern tool SendQuote \"Send the quote\" (repair: Repair) : sends\n");
    let line = tools.lines().count();
    std::fs::write(pkg.join("tools.permits"), tools)?;
    let table = dir.path("table.json");
    std::fs::write(&table, serde_json::to_vec(&permits_compiler::compile::compile_path(&pkg)?)?)?;
    let store = dir.path("ledger.db");
    set_password(&store, "Noor", NOOR_PASSWORD);
    let server = Server::on(&table, &store);
    let host = server.host("Estimator");
    let answer = host
        .post(
            "/v1/calls",
            &json!({"agent": "Estimator", "skill": "EstimateRepair", "tool": "SendQuote",
                "arguments": {"repair": "T-7"}, "requester": "Noor", "operation_key": "k1",
                "claim_token": "k1-send", "why": "the quote is ready"}),
        )
        .ok();
    assert_eq!(answer["outcome"], "proposed", "{answer}");
    let mut noor = Web::new(&server.url);
    noor.sign_in("Noor", NOOR_PASSWORD);
    let page = noor.get("/inbox/proposals/P-1");
    assert_eq!(page.status, 200);
    let effects = page.body.split("<ul id=\"effects\">").nth(1).and_then(|rest| rest.split("</ul>").next());
    assert_eq!(
        effects,
        Some(
            format!(
                "<li><strong>sends</strong>: claimed by the author: sends <span class=\"muted\">(tools.permits:{line})\
                 </span> <em>assumed</em></li>"
            )
            .as_str()
        ),
        "{}",
        page.body
    );
    Ok(())
}
