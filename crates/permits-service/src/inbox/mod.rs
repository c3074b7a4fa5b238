//! The decider's inbox (issue #17): server-rendered pages under `/inbox/` where a person signs in with a
//! password, sees what waits for them, reads a proposal as spec §5a says a person must see it, and decides.
//!
//! Every decision is the same runtime call the API makes ([`crate::api`]'s `approve_as`, `reject`,
//! `revoke_rule`), as the signed-in person and only as them: the person comes from the session, never from
//! a URL or a form. The guarantees, each with its test in `tests/service/inbox.rs`:
//!
//! - **Sign-in**: a password (Argon2id, [`crate::people`]); sessions are a random 32-byte id in a cookie
//!   `permits_session` (`HttpOnly; SameSite=Strict; Path=/`, and `Secure` when `permitd` serves TLS
//!   (`--tls-cert`) or with `--secure-cookies` behind a TLS proxy), kept in the store as a digest only,
//!   ending after [`crate::people::SESSION_LIFETIME`].
//! - **CSRF**: every form carries a token derived from the session id (SHA-256 of a purpose and the id; the
//!   sign-in form's from a pre-session cookie), checked on every POST before anything else.
//! - **Throttling**: [`PERSON_FAILURES`] failed sign-ins for one person, or [`ADDRESS_FAILURES`] from one
//!   client address, within [`FAILURE_WINDOW`] seconds refuse further sign-ins for that person or address
//!   (429) until the oldest failure is older than the window; a password is not even checked then. The
//!   counts are this instance's, in memory.
//! - **Second factor**: a person may add TOTP (RFC 6238) on `/inbox/totp`; sign-in then asks for its code
//!   (each code once). With `--require-totp` a person without one reaches only `/inbox/totp` (every other
//!   page redirects there, every other POST is 403) until they confirm one.
//! - **Single sign-on** (opt-in, [`Trusted`]): a reverse proxy names the person in a header and proves
//!   itself with a shared secret ([`PROXY_SECRET_HEADER`], compared in constant time); a request naming a
//!   person without it is 401 and logged. There is no password sign-in then; a session only carries the
//!   CSRF secret and must be the named person's. Fresh sign-in is the proxy's: it vouched for this very
//!   request, so the session's age is 0.
//! - **Fresh sign-in**: approving (once, for the task, or always) needs a sign-in younger than
//!   `--fresh-sign-in SECONDS` ([`DEFAULT_FRESH_SIGN_IN`]); an older session is shown the sign-in form.
//! - **Refusals**: a page asked for without a session redirects to the sign-in (GET) or is refused with 403
//!   (POST); pages are sent with a strict Content-Security-Policy (no script, no frames), `no-store`.

mod pages;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use axum::Form;
use axum::Router;
use axum::extract::{ConnectInfo, FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use permits_runtime::ApproveMode;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::api::App;
use crate::error::ApiError;

/// `--fresh-sign-in`'s default: a session older than 15 minutes signs in again before it approves.
pub const DEFAULT_FRESH_SIGN_IN: u64 = 15 * 60;
/// Failed sign-ins for one person within [`FAILURE_WINDOW`] after which that person's sign-ins are refused.
pub const PERSON_FAILURES: usize = 5;
/// Failed sign-ins from one client address within [`FAILURE_WINDOW`] after which its sign-ins are refused.
pub const ADDRESS_FAILURES: usize = 20;
/// The window of the sign-in throttle, in seconds (15 minutes).
pub const FAILURE_WINDOW: u64 = 15 * 60;
/// Proposals on one page of a list.
pub const PAGE_SIZE: usize = 20;

const SESSION_COOKIE: &str = "permits_session";
const SIGN_IN_COOKIE: &str = "permits_signin";

/// The inbox's own state in the service.
#[derive(Debug)]
pub(crate) struct Inbox {
    /// `--fresh-sign-in`, in seconds.
    pub(crate) fresh_sign_in: u64,
    /// `--tls-cert` or `--secure-cookies`: cookies are marked `Secure` (the service is reached over TLS,
    /// its own or a proxy's).
    pub(crate) secure: bool,
    /// `--require-totp`: nothing but enrolling a second factor until a person has confirmed one.
    pub(crate) require_totp: bool,
    /// `--trusted-header-user`: single sign-on through a reverse proxy.
    pub(crate) trusted: Option<Trusted>,
    throttle: Mutex<HashMap<String, VecDeque<u64>>>,
}

/// The header in which the reverse proxy sends its shared secret, in trusted-header mode.
pub const PROXY_SECRET_HEADER: &str = "x-permits-proxy-secret";
/// The shortest shared secret `--trusted-header-secret-file` may hold, in characters.
pub const MIN_PROXY_SECRET: usize = 32;

/// Trusted-header single sign-on (`--trusted-header-user`, `--trusted-header-secret-file`): the proxy names
/// the person in a header and proves itself with a shared secret in [`PROXY_SECRET_HEADER`].
pub struct Trusted {
    /// The header naming the person (lowercase).
    user: HeaderName,
    /// The shared secret.
    secret: String,
}

// No `Debug` of the secret.
impl std::fmt::Debug for Trusted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trusted").field("user", &self.user).finish_non_exhaustive()
    }
}

impl Trusted {
    /// The trusted-header mode `permitd serve` was asked for, if any.
    ///
    /// Errors: `--trusted-header-user` without `--trusted-header-secret-file` (or the reverse), a header
    /// name that is not one, the proxy's own secret header named as the user's, a secret file that cannot be
    /// read or holds fewer than [`MIN_PROXY_SECRET`] characters or anything but visible ASCII, and
    /// `--require-totp` (the proxy is then the only sign-in: a second factor is the proxy's to require).
    pub fn from_args(args: &crate::cli::ServeArgs) -> Result<Option<Trusted>, String> {
        let (user, file) = match (&args.trusted_header_user, &args.trusted_header_secret_file) {
            (None, None) => return Ok(None),
            (Some(user), Some(file)) => (user, file),
            (Some(_), None) => {
                return Err("`--trusted-header-user` needs `--trusted-header-secret-file`: without the proxy's shared secret anyone who reaches the service could name any person".into());
            }
            (None, Some(_)) => return Err("`--trusted-header-secret-file` is for `--trusted-header-user`".into()),
        };
        let name = HeaderName::from_bytes(user.trim().as_bytes())
            .map_err(|_| format!("`--trusted-header-user {user}` is not a header name"))?;
        if name.as_str() == PROXY_SECRET_HEADER || name == header::COOKIE || name == header::AUTHORIZATION {
            return Err(format!("`--trusted-header-user {user}`: name the header in which the proxy sends the person"));
        }
        if args.require_totp {
            return Err("`--require-totp` and `--trusted-header-user` do not go together: with single sign-on the proxy signs persons in, so require a second factor there".into());
        }
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read `--trusted-header-secret-file {}`: {e}", file.display()))?;
        let secret = text.lines().next().unwrap_or_default().trim().to_string();
        if secret.len() < MIN_PROXY_SECRET || !secret.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!(
                "`--trusted-header-secret-file {}`: its first line is the proxy's secret, at least {MIN_PROXY_SECRET} characters of visible ASCII (`openssl rand -hex 32`)",
                file.display()
            ));
        }
        Ok(Some(Trusted { user: name, secret }))
    }

    /// The person the proxy vouches for in `headers`: `Ok(None)` when no person is named, `Err` when one is
    /// named without the proxy's secret (compared in constant time).
    fn vouched(&self, headers: &HeaderMap) -> Result<Option<String>, ()> {
        let Some(user) = headers.get(&self.user) else { return Ok(None) };
        let secret = headers.get(PROXY_SECRET_HEADER).and_then(|v| v.to_str().ok()).unwrap_or("");
        // Two headers naming persons, or two secrets: refused, never "the first one".
        let once =
            headers.get_all(&self.user).iter().count() == 1 && headers.get_all(PROXY_SECRET_HEADER).iter().count() <= 1;
        if !(same(secret, &self.secret) && once) {
            return Err(());
        }
        Ok(Some(user.to_str().map_err(|_| ())?.trim().to_string()))
    }
}

impl Inbox {
    pub(crate) fn new(fresh_sign_in: u64, require_totp: bool, secure: bool) -> Inbox {
        Inbox { fresh_sign_in, secure, require_totp, trusted: None, throttle: Mutex::new(HashMap::new()) }
    }

    pub(crate) fn with_trusted(self, trusted: Option<Trusted>) -> Inbox {
        Inbox { trusted, ..self }
    }

    /// Seconds until a sign-in for these throttle keys is accepted again, if one is refused now.
    fn throttled(&self, keys: &[(String, usize)], now: u64) -> Option<u64> {
        let mut map = self.throttle.lock().unwrap_or_else(PoisonError::into_inner);
        let mut wait = None;
        for (key, limit) in keys {
            if let Some(times) = map.get_mut(key) {
                while times.front().is_some_and(|t| t.saturating_add(FAILURE_WINDOW) <= now) {
                    times.pop_front();
                }
                if times.len() >= *limit {
                    let until = times.front().map_or(0, |t| t.saturating_add(FAILURE_WINDOW) - now);
                    wait = Some(wait.map_or(until, |w: u64| w.max(until)));
                }
            }
        }
        wait
    }

    fn failed(&self, keys: &[(String, usize)], now: u64) {
        let mut map = self.throttle.lock().unwrap_or_else(PoisonError::into_inner);
        // Bounded: failures older than the window are dropped before the map grows past 100,000 keys.
        if map.len() > 100_000 {
            map.retain(|_, times| times.back().is_some_and(|t| t.saturating_add(FAILURE_WINDOW) > now));
        }
        for (key, _) in keys {
            map.entry(key.clone()).or_default().push_back(now);
        }
    }

    fn succeeded(&self, person: &str) {
        self.throttle.lock().unwrap_or_else(PoisonError::into_inner).remove(&person_key(person));
    }
}

fn person_key(person: &str) -> String {
    format!("person\u{0}{person}")
}

/// The inbox's routes, under `/inbox/`.
pub(crate) fn router() -> Router<Arc<App>> {
    Router::new()
        .route("/inbox", get(|| async { Redirect::to("/inbox/waiting") }))
        .route("/inbox/", get(|| async { Redirect::to("/inbox/waiting") }))
        .route("/inbox/sign-in", get(sign_in_page).post(sign_in))
        .route("/inbox/sign-out", post(sign_out))
        .route("/inbox/waiting", get(waiting))
        .route("/inbox/proposals/{id}", get(proposal))
        .route("/inbox/proposals/{id}/approve", post(approve))
        .route("/inbox/proposals/{id}/reject", post(reject))
        .route("/inbox/rules", get(rules))
        .route("/inbox/rules/{id}/revoke", post(revoke_rule))
        .route("/inbox/history", get(history))
        .route("/inbox/tables", get(tables))
        .route("/inbox/totp", get(totp_page).post(totp_confirm))
        .layer(axum::middleware::map_response(headers))
}

/// Every inbox answer: no caching, no framing, no script, no referrer.
async fn headers(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

/// A token for forms of `purpose`, derived from a secret the browser holds in an HttpOnly cookie.
fn derive(purpose: &str, secret: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"permits-inbox-csrf\0");
    h.update(purpose.as_bytes());
    h.update(b"\0");
    h.update(secret.as_bytes());
    crate::keys::hex(&h.finalize())
}

use crate::people::same_text as same;

fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
}

/// 64 lowercase hex digits: the only form a session id or a sign-in secret has.
fn is_secret(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn set_cookie(name: &str, value: &str, path: &str, max_age: u64, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    HeaderValue::from_str(&format!("{name}={value}; HttpOnly; SameSite=Strict; Path={path}; Max-Age={max_age}{secure}"))
        .unwrap_or_else(|_| HeaderValue::from_static("permits_invalid=1"))
}

/// The signed-in person of a request: from the session cookie only.
pub(crate) struct Signed {
    person: String,
    session: String,
    csrf: String,
    signed_in_at: u64,
}

impl FromRequestParts<Arc<App>> for Signed {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<Signed, Response> {
        // Single sign-on: the proxy vouches for the person of this very request, or nobody is signed in.
        let vouched = match &app.inbox.trusted {
            Some(_) => Some(vouched(app, parts).map_err(|refused| *refused)?),
            None => None,
        };
        let id = cookie(&parts.headers, SESSION_COOKIE).filter(|id| is_secret(id)).map(str::to_string);
        let found = match &id {
            Some(id) => match app.keys.session(id, crate::server::now()) {
                Ok(found) => found,
                Err(e) => return Err(error_page(None, StatusCode::SERVICE_UNAVAILABLE, &e)),
            },
            None => None,
        };
        // With single sign-on the session only carries the CSRF secret: it must be the vouched person's.
        let found = found.filter(|s| vouched.as_ref().is_none_or(|v| *v == s.person));
        match (id, found) {
            (Some(session), Some(s)) => {
                let csrf = derive("session", &session);
                // With single sign-on the proxy authenticated this request now: its fresh sign-in is the
                // proxy's (see `approve`).
                let signed_in_at = if vouched.is_some() { crate::server::now() } else { s.signed_in_at };
                let signed = Signed { person: s.person, session, csrf, signed_in_at };
                // `--require-totp`: until a person has a second factor, only its page (and signing out) is theirs.
                if app.inbox.require_totp && !matches!(parts.uri.path(), "/inbox/totp" | "/inbox/sign-out") {
                    match app.keys.second_factor(&signed.person) {
                        Ok(Some(f)) if f.confirmed => {}
                        Ok(_) if parts.method == Method::GET || parts.method == Method::HEAD => {
                            return Err(Redirect::to("/inbox/totp").into_response());
                        }
                        Ok(_) => {
                            return Err(error_page(Some(&signed), StatusCode::FORBIDDEN, SECOND_FACTOR_FIRST));
                        }
                        Err(e) => return Err(error_page(None, StatusCode::SERVICE_UNAVAILABLE, &e)),
                    }
                }
                Ok(signed)
            }
            _ if parts.method == Method::GET || parts.method == Method::HEAD => {
                let next = parts.uri.path_and_query().map_or("/inbox/waiting", |p| p.as_str());
                Err(Redirect::to(&format!("/inbox/sign-in?next={}", encode(next))).into_response())
            }
            _ => Err(error_page(None, StatusCode::FORBIDDEN, "this needs a signed-in person: sign in first")),
        }
    }
}

/// `--require-totp`'s refusal of everything but adding a second factor.
const SECOND_FACTOR_FIRST: &str =
    "this service requires a second factor: add one on the Second factor page (/inbox/totp) before anything else";

/// In trusted-header mode, the person the proxy vouches for: a request naming one without the proxy's
/// secret is refused (401) and logged (its address and the header's name, never a secret); one naming
/// nobody is refused too (401: this inbox signs in through its proxy only), and so is one naming a person
/// the table does not know (403).
fn vouched(app: &App, parts: &Parts) -> Result<String, Box<Response>> {
    let Some(trusted) = &app.inbox.trusted else {
        return Err(Box::new(error_page(None, StatusCode::INTERNAL_SERVER_ERROR, "no single sign-on")));
    };
    let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|c| c.0.to_string()).unwrap_or_default();
    match trusted.vouched(&parts.headers) {
        Ok(Some(person)) if app.rt.table().persons.contains_key(&person) => Ok(person),
        Ok(Some(person)) => {
            crate::say!(
                "permitd: inbox: the proxy named {:?} in `{}`, who is not a person of the table (from {peer})",
                permits_runtime::display::visible(&person),
                trusted.user
            );
            Err(Box::new(error_page(
                None,
                StatusCode::FORBIDDEN,
                "the single sign-on names a person this service's table does not know: ask the operator",
            )))
        }
        Ok(None) => Err(Box::new(error_page(
            None,
            StatusCode::UNAUTHORIZED,
            "this inbox signs persons in through its single sign-on proxy only: open it through the proxy",
        ))),
        Err(()) => {
            crate::say!(
                "permitd: inbox: refused a request naming a person in `{}` without the proxy's secret in `{PROXY_SECRET_HEADER}` ({} {} from {peer}): nobody is signed in",
                trusted.user,
                parts.method,
                parts.uri.path()
            );
            Err(Box::new(error_page(
                None,
                StatusCode::UNAUTHORIZED,
                "this request names a person but does not come from the single sign-on proxy: refused",
            )))
        }
    }
}

impl Signed {
    /// The refusal (403) of a form whose CSRF token is not this session's; `None` when it is.
    fn refused(&self, token: &str) -> Option<Response> {
        (!same(token, &self.csrf)).then(|| {
            error_page(
                Some(self),
                StatusCode::FORBIDDEN,
                "this form's CSRF token is missing or is not this session's: reload the page and try again",
            )
        })
    }

    fn age(&self) -> u64 {
        crate::server::now().saturating_sub(self.signed_in_at)
    }
}

/// Percent-encodes a path for a query parameter.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'/' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Where a sign-in may send the person next: a path of the inbox, nothing else (no open redirect).
fn next_or_default(next: Option<&str>) -> String {
    match next {
        Some(n) if n.starts_with("/inbox/") && !n.contains("//") && !n.contains('\\') && !n.contains("/..") => {
            n.to_string()
        }
        _ => "/inbox/waiting".to_string(),
    }
}

fn html(status: StatusCode, markup: maud::Markup) -> Response {
    (status, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], markup.into_string()).into_response()
}

fn error_page(who: Option<&Signed>, status: StatusCode, message: &str) -> Response {
    html(status, pages::message(who.map(|s| (s.person.as_str(), s.csrf.as_str())), status, message))
}

fn api_error(who: &Signed, e: ApiError) -> Response {
    error_page(Some(who), e.status, &e.message)
}

#[derive(Debug, Deserialize)]
pub(crate) struct NextQuery {
    #[serde(default)]
    next: Option<String>,
}

async fn sign_in_page(State(app): State<Arc<App>>, request: axum::extract::Request) -> Response {
    let (parts, _) = request.into_parts();
    let next = next_or_default(Query::<NextQuery>::try_from_uri(&parts.uri).ok().and_then(|q| q.0.next).as_deref());
    if app.inbox.trusted.is_none() {
        return sign_in_form(&app, &parts.headers, StatusCode::OK, &next, None, "");
    }
    // Single sign-on: the proxy vouched for the person; a session is made only for its CSRF secret.
    let person = match vouched(&app, &parts) {
        Ok(person) => person,
        Err(refused) => return *refused,
    };
    let old = cookie(&parts.headers, SESSION_COOKIE).filter(|s| is_secret(s)).map(str::to_string);
    signed_in(&app, person, old, &next).await
}

/// Starts a session for `person` (ending `old`, the browser's previous one) and sends them to `next`.
async fn signed_in(app: &Arc<App>, person: String, old: Option<String>, next: &str) -> Response {
    let start = app.clone();
    let now = crate::server::now();
    let started = tokio::task::spawn_blocking(move || {
        if let Some(old) = old {
            start.keys.end_session(&old)?;
        }
        start.keys.start_session(&person, now)
    })
    .await;
    let session = match started {
        Ok(Ok(session)) => session,
        Ok(Err(e)) => return error_page(None, StatusCode::SERVICE_UNAVAILABLE, &e),
        Err(_) => return error_page(None, StatusCode::INTERNAL_SERVER_ERROR, "the sign-in failed inside the service"),
    };
    let mut response = Redirect::to(next).into_response();
    let h = response.headers_mut();
    h.append(
        header::SET_COOKIE,
        set_cookie(SESSION_COOKIE, &session, "/", crate::people::SESSION_LIFETIME, app.inbox.secure),
    );
    h.append(header::SET_COOKIE, set_cookie(SIGN_IN_COOKIE, "", "/inbox", 0, app.inbox.secure));
    response
}

/// The sign-in form, with a pre-session secret in a cookie (made now if the browser has none).
fn sign_in_form(
    app: &App,
    headers: &HeaderMap,
    status: StatusCode,
    next: &str,
    note: Option<&str>,
    person: &str,
) -> Response {
    let (secret, new) = match cookie(headers, SIGN_IN_COOKIE).filter(|s| is_secret(s)) {
        Some(s) => (s.to_string(), false),
        None => match crate::people::secret() {
            Ok(s) => (s, true),
            Err(e) => return error_page(None, StatusCode::INTERNAL_SERVER_ERROR, &e),
        },
    };
    let mut response = html(status, pages::sign_in(&derive("sign-in", &secret), next, note, person));
    if new {
        response
            .headers_mut()
            .append(header::SET_COOKIE, set_cookie(SIGN_IN_COOKIE, &secret, "/inbox", 3600, app.inbox.secure));
    }
    response
}

#[derive(Deserialize)]
pub(crate) struct SignInForm {
    #[serde(default)]
    person: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    next: Option<String>,
    /// The one-time code of a person with a second factor.
    #[serde(default)]
    code: String,
}

// No `Debug`: the form holds a password.
impl std::fmt::Debug for SignInForm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignInForm").field("person", &self.person).finish_non_exhaustive()
    }
}

async fn sign_in(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Form(form): Form<SignInForm>,
) -> Response {
    let next = next_or_default(form.next.as_deref());
    if app.inbox.trusted.is_some() {
        return error_page(
            None,
            StatusCode::FORBIDDEN,
            "this inbox signs persons in through its single sign-on proxy only: there is no password sign-in",
        );
    }
    let pre = cookie(&headers, SIGN_IN_COOKIE).filter(|s| is_secret(s));
    if !pre.is_some_and(|pre| same(&form.csrf, &derive("sign-in", pre))) {
        return error_page(
            None,
            StatusCode::FORBIDDEN,
            "this sign-in form's CSRF token is missing or wrong: open the sign-in page again",
        );
    }
    let now = crate::server::now();
    let person = form.person.trim().to_string();
    let keys = [(person_key(&person), PERSON_FAILURES), (format!("address\u{0}{}", peer.ip()), ADDRESS_FAILURES)];
    if let Some(wait) = app.inbox.throttled(&keys, now) {
        let note = format!(
            "too many failed sign-ins for this person or from this address: try again in {} minute(s)",
            wait.div_ceil(60).max(1)
        );
        return sign_in_form(&app, &headers, StatusCode::TOO_MANY_REQUESTS, &next, Some(&note), &person);
    }
    let check = app.clone();
    let (who, password, code) = (person.clone(), form.password, form.code);
    let verified = tokio::task::spawn_blocking(move || -> Result<Result<(), &'static str>, String> {
        let phc = check.keys.password_hash(&who)?;
        // A person without a password never signs in, but costs the same time as a wrong password.
        let matches = crate::people::verify_password(phc.as_deref().unwrap_or(crate::people::decoy_hash()), &password);
        if !(matches && phc.is_some()) {
            return Ok(Err("that person and password do not match"));
        }
        match check.keys.second_factor(&who)? {
            Some(factor) if factor.confirmed => {
                let step = crate::people::totp::matching_step(&factor.secret, &code, now);
                match step {
                    Some(step) if check.keys.use_second_factor(&who, step)? => Ok(Ok(())),
                    _ => Ok(Err("the one-time code is missing, wrong, or was already used: give the code your authenticator shows now")),
                }
            }
            _ => Ok(Ok(())),
        }
    })
    .await;
    match verified {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(note))) => {
            app.inbox.failed(&keys, now);
            return sign_in_form(&app, &headers, StatusCode::UNAUTHORIZED, &next, Some(note), &person);
        }
        Ok(Err(e)) => return error_page(None, StatusCode::SERVICE_UNAVAILABLE, &e),
        Err(_) => return error_page(None, StatusCode::INTERNAL_SERVER_ERROR, "the sign-in failed inside the service"),
    }
    app.inbox.succeeded(&person);
    let old = cookie(&headers, SESSION_COOKIE).filter(|s| is_secret(s)).map(str::to_string);
    signed_in(&app, person, old, &next).await
}

#[derive(Debug, Deserialize)]
pub(crate) struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

async fn sign_out(State(app): State<Arc<App>>, who: Signed, Form(form): Form<CsrfForm>) -> Response {
    if let Some(r) = who.refused(&form.csrf) {
        return r;
    }
    let end = app.clone();
    let session = who.session.clone();
    if let Ok(Err(e)) = tokio::task::spawn_blocking(move || end.keys.end_session(&session)).await {
        return error_page(Some(&who), StatusCode::SERVICE_UNAVAILABLE, &e);
    }
    let mut response = Redirect::to("/inbox/sign-in").into_response();
    response.headers_mut().append(header::SET_COOKIE, set_cookie(SESSION_COOKIE, "", "/", 0, app.inbox.secure));
    response
}

#[derive(Debug, Deserialize)]
pub(crate) struct PageQuery {
    #[serde(default)]
    page: Option<usize>,
}

/// Why a waiting proposal is in a person's list.
#[derive(Clone, Debug)]
pub(crate) enum Why {
    /// They may decide it; the words say by which route ("routed to you", "role `Manager`").
    Decide(String),
    /// It is their request, decided by someone else (the words say whom).
    Mine(String),
}

async fn waiting(State(app): State<Arc<App>>, who: Signed, Query(q): Query<PageQuery>) -> Response {
    let person = who.person.clone();
    let asked = q.page.unwrap_or(1).max(1);
    let listed = app
        .run(move |app| {
            // One page, read through the store's indexes on the status and the deciders; the counts by
            // decider come from the same index, never from every proposal.
            let offset = (asked - 1).saturating_mul(PAGE_SIZE);
            let (page, counts) = app.rt.waiting_page_for(&person, true, offset, PAGE_SIZE)?;
            let table = app.rt.table();
            let mut groups: BTreeMap<String, usize> = BTreeMap::new();
            for c in &counts {
                *groups.entry(group_words(&table, &person, &c.decider, c.own)).or_default() += c.count;
            }
            let mut items = Vec::new();
            for p in page.proposals {
                let why = match app.rt.may_decide(&p, &person) {
                    Ok(()) => Why::Decide(pages::route_for(&p, &person)),
                    Err(_) => Why::Mine(p.decider.waiting_on()),
                };
                items.push((p, why));
            }
            Ok((items, groups, page.total))
        })
        .await;
    match listed {
        Ok((items, counts, total)) => {
            let pages = total.div_ceil(PAGE_SIZE).max(1);
            let page = asked.min(pages);
            html(StatusCode::OK, pages::waiting(&who.person, &who.csrf, &items, &counts, page, pages))
        }
        Err(e) => api_error(&who, e),
    }
}

/// The words of a group of waiting proposals in the counts, from their decider key
/// ([`permits_runtime::decider_key`]) and whether they are the person's own requests: the words
/// [`pages::route_for`] gives each of them.
fn group_words(table: &permits_runtime::table::Table, person: &str, key: &str, own: bool) -> String {
    use permits_runtime::table::Holder;
    let roles = table.persons.get(person).map(|p| p.roles.as_slice()).unwrap_or(&[]);
    let holds = |holders: &[Holder]| {
        holders.iter().any(|h| match h {
            Holder::Person(p) => p == person,
            Holder::Role(r) => roles.contains(r),
        })
    };
    let (kind, name) = key.split_once(':').unwrap_or((key, ""));
    let theirs = match kind {
        "person" if name == person => Some("routed to you".to_string()),
        "requester" if name == person => Some("the work is yours".to_string()),
        "sponsored" if table.agents.get(name).is_some_and(|a| a.sponsor == person) => {
            Some("the work is yours".to_string())
        }
        "role" if !own && roles.iter().any(|r| r == name) => Some(format!("for role {name}")),
        "queue" if !own && table.queues.get(name).is_some_and(|q| holds(&q.decided_by)) => {
            Some(format!("in the {name} queue"))
        }
        _ => None,
    };
    match theirs {
        Some(words) => words,
        None if holds(&table.authority.decides_proposals) => "you decide proposals (decides_proposals)".into(),
        None => "your requests, decided by others".into(),
    }
}

async fn proposal(State(app): State<Arc<App>>, who: Signed, Path(id): Path<String>) -> Response {
    let person = who.person.clone();
    let read = app
        .run(move |app| {
            let p = app.rt.proposal(&id)?;
            let table = app.rt.table();
            let budget = match table.tools.get(&p.tool).and_then(|t| t.spends.as_ref()) {
                Some(spend) => Some(app.rt.budget(&spend.budget)?),
                None => None,
            };
            let may = app.rt.may_decide(&p, &person);
            let may_rule = app.rt.may_make_rule_from(&p, &person);
            Ok((p, table, budget, may, may_rule))
        })
        .await;
    match read {
        Ok((p, table, budget, may, may_rule)) => {
            let view = pages::ProposalView {
                person: &who.person,
                csrf: &who.csrf,
                p: &p,
                table: &table,
                budget: budget.as_ref(),
                may: may.as_ref().map(|_| ()).map_err(|e| e.as_str()),
                may_rule: may_rule.as_ref().map(|_| ()).map_err(|e| e.as_str()),
                age: who.age(),
                fresh: app.inbox.fresh_sign_in,
            };
            html(StatusCode::OK, pages::proposal(&view))
        }
        Err(e) => api_error(&who, e),
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct ApproveForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    fingerprint: String,
    /// `once`, `task` or `always`.
    #[serde(default)]
    how: String,
    /// `these` or `any` (for `task` and `always`).
    #[serde(default)]
    scope: String,
}

async fn approve(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    who: Signed,
    Path(id): Path<String>,
    Form(form): Form<ApproveForm>,
) -> Response {
    if let Some(r) = who.refused(&form.csrf) {
        return r;
    }
    let mode = match (form.how.as_str(), form.scope.as_str()) {
        ("once", _) => ApproveMode::Once,
        ("task", "these") => ApproveMode::ForThisTask { any_arguments: false },
        ("task", "any") => ApproveMode::ForThisTask { any_arguments: true },
        ("always", "these") => ApproveMode::AlwaysTheseArguments,
        ("always", "any") => ApproveMode::AlwaysLikeThis,
        _ => {
            return error_page(
                Some(&who),
                StatusCode::BAD_REQUEST,
                "approve `once`, for this `task` or `always`, with the scope `these` or `any` arguments",
            );
        }
    };
    let page = format!("/inbox/proposals/{}", encode(&id));
    if let Some(refused) = needs_second_factor(&app, &who).await {
        return refused;
    }
    if who.age() > app.inbox.fresh_sign_in {
        let note = format!(
            "approving needs a fresh sign-in: yours is {} old, and this service asks again after {}. Sign in again, then approve",
            pages::duration(who.age()),
            pages::duration(app.inbox.fresh_sign_in)
        );
        return sign_in_form(&app, &headers, StatusCode::FORBIDDEN, &page, Some(&note), &who.person);
    }
    match crate::api::approve_as(&app, id, who.person.clone(), form.fingerprint, mode).await {
        Ok(_) => Redirect::to(&page).into_response(),
        Err(e) => api_error(&who, e),
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct ReasonForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    reason: String,
}

async fn reject(
    State(app): State<Arc<App>>,
    who: Signed,
    Path(id): Path<String>,
    Form(form): Form<ReasonForm>,
) -> Response {
    if let Some(r) = who.refused(&form.csrf) {
        return r;
    }
    let page = format!("/inbox/proposals/{}", encode(&id));
    let person = who.person.clone();
    match app.change(move |app| Ok(app.rt.reject(&id, &person, &form.reason)?)).await {
        Ok(_) => Redirect::to(&page).into_response(),
        Err(e) => api_error(&who, e),
    }
}

async fn rules(State(app): State<Arc<App>>, who: Signed) -> Response {
    let person = who.person.clone();
    match app.run(move |app| Ok(app.rt.rules()?)).await {
        Ok(mut all) => {
            all.retain(|r| r.by == person);
            all.reverse();
            html(StatusCode::OK, pages::rules(&who.person, &who.csrf, &all))
        }
        Err(e) => api_error(&who, e),
    }
}

async fn revoke_rule(
    State(app): State<Arc<App>>,
    who: Signed,
    Path(id): Path<String>,
    Form(form): Form<ReasonForm>,
) -> Response {
    if let Some(r) = who.refused(&form.csrf) {
        return r;
    }
    let person = who.person.clone();
    match app.change(move |app| Ok(app.rt.revoke_rule(&id, &person, &form.reason)?)).await {
        Ok(_) => Redirect::to("/inbox/rules").into_response(),
        Err(e) => api_error(&who, e),
    }
}

async fn history(State(app): State<Arc<App>>, who: Signed, Query(q): Query<PageQuery>) -> Response {
    let person = who.person.clone();
    let asked = q.page.unwrap_or(1).max(1);
    let read = app
        .run(move |app| {
            // The proposals this person asked for or decided, one page through the store's indexes.
            let query = permits_runtime::ProposalQuery { involving: Some(person), ..Default::default() };
            let offset = (asked - 1).saturating_mul(PAGE_SIZE);
            Ok(app.rt.proposal_page(&query, offset, PAGE_SIZE)?)
        })
        .await;
    match read {
        Ok(found) => {
            let pages = found.total.div_ceil(PAGE_SIZE).max(1);
            let page = asked.min(pages);
            html(StatusCode::OK, pages::history(&who.person, &who.csrf, &found.proposals, found.total, page, pages))
        }
        Err(e) => api_error(&who, e),
    }
}

async fn tables(State(app): State<Arc<App>>, who: Signed) -> Response {
    match app.run(|app| Ok(app.rt.installed_tables()?)).await {
        Ok(mut all) => {
            all.reverse();
            let current = app.rt.table().header.table_digest.clone();
            html(StatusCode::OK, pages::tables(&who.person, &who.csrf, &all, &current))
        }
        Err(e) => api_error(&who, e),
    }
}

/// With `--require-totp`, the refusal of an approval by a person without a confirmed second factor.
async fn needs_second_factor(app: &Arc<App>, who: &Signed) -> Option<Response> {
    if !app.inbox.require_totp {
        return None;
    }
    let read = app.clone();
    let person = who.person.clone();
    match tokio::task::spawn_blocking(move || read.keys.second_factor(&person)).await {
        Ok(Ok(Some(f))) if f.confirmed => None,
        Ok(Ok(_)) => Some(error_page(
            Some(who),
            StatusCode::FORBIDDEN,
            "this service requires a second factor to approve: add one on the Second factor page (/inbox/totp), then sign in with its code",
        )),
        Ok(Err(e)) => Some(error_page(Some(who), StatusCode::SERVICE_UNAVAILABLE, &e)),
        Err(_) => Some(error_page(Some(who), StatusCode::INTERNAL_SERVER_ERROR, "the check failed inside the service")),
    }
}

/// `GET /inbox/totp`: the person's second factor: on, or a new secret to enrol (with its `otpauth://` URI).
async fn totp_page(State(app): State<Arc<App>>, who: Signed) -> Response {
    let read = app.clone();
    let person = who.person.clone();
    match tokio::task::spawn_blocking(move || read.keys.begin_second_factor(&person)).await {
        Ok(Ok(secret)) => {
            let note = (app.inbox.require_totp && secret.is_some()).then_some(SECOND_FACTOR_FIRST);
            html(StatusCode::OK, pages::totp(&who.person, &who.csrf, secret.as_deref(), note))
        }
        Ok(Err(e)) => error_page(Some(&who), StatusCode::SERVICE_UNAVAILABLE, &e),
        Err(_) => error_page(Some(&who), StatusCode::INTERNAL_SERVER_ERROR, "the enrolment failed inside the service"),
    }
}

#[derive(Deserialize)]
pub(crate) struct CodeForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    code: String,
}

/// `POST /inbox/totp`: confirms the enrolment with a code of the new secret (a fresh sign-in needed).
async fn totp_confirm(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    who: Signed,
    Form(form): Form<CodeForm>,
) -> Response {
    if let Some(r) = who.refused(&form.csrf) {
        return r;
    }
    if who.age() > app.inbox.fresh_sign_in {
        let note = "adding a second factor needs a fresh sign-in: sign in again, then add it";
        return sign_in_form(&app, &headers, StatusCode::FORBIDDEN, "/inbox/totp", Some(note), &who.person);
    }
    let check = app.clone();
    let person = who.person.clone();
    let now = crate::server::now();
    let confirmed = tokio::task::spawn_blocking(move || -> Result<Option<bool>, String> {
        let Some(factor) = check.keys.second_factor(&person)? else { return Ok(None) };
        if factor.confirmed {
            return Ok(Some(true));
        }
        match crate::people::totp::matching_step(&factor.secret, &form.code, now) {
            Some(step) => check.keys.use_second_factor(&person, step).map(Some),
            None => Ok(Some(false)),
        }
    })
    .await;
    match confirmed {
        Ok(Ok(Some(true))) => html(
            StatusCode::OK,
            pages::totp(
                &who.person,
                &who.csrf,
                None,
                Some("Your second factor is on: sign-in asks for its code from now on."),
            ),
        ),
        Ok(Ok(_)) => error_page(
            Some(&who),
            StatusCode::UNPROCESSABLE_ENTITY,
            "that code is not the one the new secret gives now: open the Second factor page again and enter the code your authenticator shows",
        ),
        Ok(Err(e)) => error_page(Some(&who), StatusCode::SERVICE_UNAVAILABLE, &e),
        Err(_) => error_page(Some(&who), StatusCode::INTERNAL_SERVER_ERROR, "the enrolment failed inside the service"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sign_in_sends_only_to_a_page_of_the_inbox() {
        assert_eq!(next_or_default(Some("/inbox/proposals/P-1")), "/inbox/proposals/P-1");
        for evil in ["https://evil.example/", "//evil.example/inbox/", "/inbox//evil", "/inbox/\\evil", "/v1/rules"] {
            assert_eq!(next_or_default(Some(evil)), "/inbox/waiting", "{evil}");
        }
        assert_eq!(next_or_default(None), "/inbox/waiting");
    }

    #[test]
    fn the_throttle_refuses_after_its_limit_and_forgets_after_its_window() {
        let inbox = Inbox::new(900, false, false);
        let keys = [(person_key("Noor"), PERSON_FAILURES)];
        for _ in 0..PERSON_FAILURES {
            assert_eq!(inbox.throttled(&keys, 1000), None);
            inbox.failed(&keys, 1000);
        }
        assert_eq!(inbox.throttled(&keys, 1000), Some(FAILURE_WINDOW));
        assert_eq!(inbox.throttled(&keys, 1000 + FAILURE_WINDOW - 1), Some(1));
        assert_eq!(inbox.throttled(&keys, 1000 + FAILURE_WINDOW), None);
    }

    #[test]
    fn cookies_are_read_by_exact_name() {
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, HeaderValue::from_static("xpermits_session=1; permits_session=abc; b=2"));
        assert_eq!(cookie(&headers, SESSION_COOKIE), Some("abc"));
        assert_eq!(cookie(&headers, "nope"), None);
    }
}
