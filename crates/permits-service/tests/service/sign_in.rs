//! Serving and signing in, against the real binary: HTTPS with a certificate made by the test (the
//! `openssl` command), a start refused on a bad certificate or key, and the trusted-header single sign-on
//! of a reverse proxy (refused without its shared secret).

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::inbox::{NOOR_PASSWORD, Web, field, propose_for_mia, set_password, workshop};
use super::{R, Server, Temp, permitd};

/// A self-signed certificate for `localhost` and 127.0.0.1 (P-256, a day) and its key, by `openssl`:
/// (certificate, key).
pub(super) fn certificate(dir: &Temp, name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let (cert, key) = (dir.path(&format!("{name}.crt")), dir.path(&format!("{name}.key")));
    let out = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"])
        .args(["-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
        // An end entity, not a CA (which `openssl req -x509` makes by default and webpki refuses as a server).
        .args(["-addext", "basicConstraints=critical,CA:FALSE", "-addext", "extendedKeyUsage=serverAuth", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdin(Stdio::null())
        .output()
        .expect("the `openssl` command (Debian's `openssl`)");
    assert!(out.status.success(), "openssl: {}", String::from_utf8_lossy(&out.stderr));
    (cert, key)
}

/// The base-64 SHA-256 of the certificate's public key (SPKI), as Chromium's
/// `--ignore-certificate-errors-spki-list` takes it.
pub(super) fn spki_sha256(cert: &Path) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg("openssl x509 -pubkey -noout -in \"$1\" | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | openssl base64 -A")
        .arg("sh")
        .arg(cert)
        .output()
        .expect("openssl");
    assert!(out.status.success(), "openssl: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A client trusting only the certificate `cert` (rustls with ring, as the service).
pub(super) fn trusting(cert: &Path) -> ureq::Agent {
    use ureq::tls::{Certificate, RootCerts, TlsConfig, TlsProvider};
    let pem = std::fs::read(cert).expect("the certificate");
    let root = Certificate::from_pem(&pem).expect("a PEM certificate").to_owned();
    let tls = TlsConfig::builder()
        .provider(TlsProvider::Rustls)
        .root_certs(RootCerts::new_with_certs(&[root]))
        .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .build();
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_global(Some(Duration::from_secs(60)))
        .proxy(None)
        .tls_config(tls)
        .build()
        .into()
}

#[test]
fn with_a_certificate_permitd_serves_https_only_and_its_cookies_are_secure() -> R {
    let certs = Temp::new("tls-certs");
    let (cert, key) = certificate(&certs, "server");
    let (cert_arg, key_arg) = (cert.display().to_string(), key.display().to_string());
    let (server, _dir) = workshop(&["--tls-cert", &cert_arg, "--tls-key", &key_arg], None);
    let https = server.url.clone();
    assert!(https.starts_with("https://127.0.0.1:"), "{https}");
    // A client that trusts this certificate talks HTTPS: the sign-in, and a session cookie marked `Secure`.
    let mut noor = Web::with_agent(&https, trusting(&cert));
    let form = noor.get("/inbox/sign-in");
    assert_eq!(form.status, 200, "{}", form.body);
    let pre = form.set_cookies.iter().find(|c| c.starts_with("permits_signin=")).ok_or("no sign-in cookie")?;
    assert!(pre.ends_with("; HttpOnly; SameSite=Strict; Path=/inbox; Max-Age=3600; Secure"), "{pre}");
    let signed = noor.sign_in("Noor", NOOR_PASSWORD);
    assert_eq!((signed.status, signed.location.as_deref()), (303, Some("/inbox/waiting")), "{}", signed.body);
    let cookie = signed.set_cookies.iter().find(|c| c.starts_with("permits_session=")).ok_or("no session cookie")?;
    assert!(cookie.ends_with("; HttpOnly; SameSite=Strict; Path=/; Max-Age=43200; Secure"), "{cookie}");
    assert_eq!(noor.get("/inbox/waiting").status, 200);
    // The API too: a host's call over HTTPS.
    let token = server.key(&["--agents", "Estimator"]);
    let mut table =
        trusting(&cert).get(format!("{https}/v1/table")).header("authorization", format!("Bearer {token}")).call()?;
    assert_eq!(table.status().as_u16(), 200);
    assert!(table.body_mut().read_to_string()?.contains("\"table_digest\""));
    // Plain HTTP to the TLS port gets no answer.
    let plain = format!("http://{}", https.trim_start_matches("https://"));
    let agent: ureq::Agent =
        ureq::Agent::config_builder().timeout_global(Some(Duration::from_secs(20))).proxy(None).build().into();
    let answer = agent.get(format!("{plain}/inbox/sign-in")).call();
    assert!(answer.is_err(), "plain HTTP was answered: {:?}", answer.map(|r| r.status()));
    // A client that does not trust this certificate (it trusts another) refuses the connection.
    let (other, _) = certificate(&certs, "other");
    let refused = trusting(&other).get(format!("{https}/inbox/sign-in")).call();
    let error = refused.err().ok_or("a client trusting another certificate was answered")?.to_string();
    assert!(error.to_lowercase().contains("certificate"), "{error}");
    // And after all that, the service still answers its trusting client.
    assert_eq!(noor.get("/inbox/waiting").status, 200);
    Ok(())
}

/// `permitd serve ARGS` on the workshop, which must not start: (exit code, stderr, stdout).
fn refused_start(dir: &Temp, more: &[&str]) -> (Option<i32>, String, String) {
    let table = dir.path("table.json");
    if !table.exists() {
        std::fs::copy(super::fixture("workshop"), &table).expect("the workshop fixture");
    }
    let out_path = dir.path("stdout.txt");
    let err_path = dir.path("stderr.txt");
    let mut child = permitd()
        .args(["serve", "--listen", "127.0.0.1:0", "--table"])
        .arg(&table)
        .arg("--store")
        .arg(dir.path("ledger.db"))
        .args(more)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).expect("stdout file"))
        .stderr(std::fs::File::create(&err_path).expect("stderr file"))
        .spawn()
        .expect("permitd serve");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("permitd's status") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("permitd serve {more:?} started: {}", std::fs::read_to_string(&out_path).unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    (status.code(), read(&err_path), read(&out_path))
}

#[test]
fn a_bad_certificate_or_key_ends_the_start_with_a_clear_error_and_nothing_served() -> R {
    let dir = Temp::new("tls-bad");
    let (cert, key) = certificate(&dir, "good");
    let (_, other_key) = certificate(&dir, "other");
    let garbage = dir.path("garbage.pem");
    std::fs::write(&garbage, "not a PEM file\n")?;
    let missing = dir.path("missing.pem");
    let s = |p: &Path| p.display().to_string();
    for (cert, key, expected) in [
        (s(&garbage), s(&key), "holds no PEM certificate".to_string()),
        (s(&cert), s(&garbage), "holds no PEM private key".to_string()),
        (s(&cert), s(&other_key), "do not make a TLS identity".to_string()),
        (s(&key), s(&key), "holds no PEM certificate".to_string()),
        (s(&missing), s(&key), format!("cannot read `{}`", s(&missing))),
    ] {
        let (code, stderr, stdout) = refused_start(&dir, &["--tls-cert", &cert, "--tls-key", &key]);
        assert_eq!(code, Some(1), "{cert} {key}: {stderr}");
        assert!(stderr.contains(&expected), "{cert} {key}: expected `{expected}` in {stderr}");
        assert_eq!(stdout, "", "nothing is served");
    }
    // One without the other is a usage error.
    let (code, stderr, stdout) = refused_start(&dir, &["--tls-cert", &s(&cert)]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--tls-key"), "{stderr}");
    assert_eq!(stdout, "");
    Ok(())
}

/// The proxy's shared secret in these tests.
const PROXY_SECRET: &str = "0123456789abcdef0123456789abcdef-proxy";

#[test]
fn single_sign_on_is_refused_without_its_shared_secret() -> R {
    let dir = Temp::new("sso-refused");
    let short = dir.path("short.txt");
    std::fs::write(&short, "too-short\n")?;
    let good = dir.path("secret.txt");
    std::fs::write(&good, format!("{PROXY_SECRET}\n"))?;
    let s = |p: &Path| p.display().to_string();
    for (more, expected) in [
        (vec!["--trusted-header-user", "X-Forwarded-User"], "needs `--trusted-header-secret-file`"),
        (vec!["--trusted-header-secret-file", &s(&good)], "is for `--trusted-header-user`"),
        (vec!["--trusted-header-user", "X-Forwarded-User", "--trusted-header-secret-file", &s(&short)], "at least 32"),
        (
            vec!["--trusted-header-user", "X-Forwarded-User", "--trusted-header-secret-file", &s(&dir.path("none"))],
            "cannot read `--trusted-header-secret-file",
        ),
        (vec!["--trusted-header-user", "Bad Header", "--trusted-header-secret-file", &s(&good)], "not a header name"),
        (
            vec!["--trusted-header-user", "X-Permits-Proxy-Secret", "--trusted-header-secret-file", &s(&good)],
            "name the header",
        ),
        (
            vec![
                "--trusted-header-user",
                "X-Forwarded-User",
                "--trusted-header-secret-file",
                &s(&good),
                "--require-totp",
            ],
            "do not go together",
        ),
    ] {
        let (code, stderr, stdout) = refused_start(&dir, &more);
        assert_eq!(code, Some(1), "{more:?}: {stderr}");
        assert!(stderr.contains(expected), "{more:?}: expected `{expected}` in {stderr}");
        assert_eq!(stdout, "", "nothing is served");
    }
    Ok(())
}

/// A browser behind the proxy: every request carries the proxy's headers for `person`, with `secret`.
fn behind_proxy(url: &str, person: &str, secret: Option<&str>) -> Web {
    let mut web = Web::new(url);
    web.headers.push(("X-Forwarded-User".into(), person.into()));
    if let Some(secret) = secret {
        web.headers.push(("X-Permits-Proxy-Secret".into(), secret.into()));
    }
    web
}

#[test]
fn single_sign_on_signs_in_the_proxys_person_only_with_its_secret_and_forms_still_need_csrf() -> R {
    let dir = Temp::new("sso");
    let table = dir.path("table.json");
    std::fs::copy(super::fixture("workshop"), &table)?;
    let store = dir.path("ledger.db");
    // A password exists, but there is no password sign-in in this mode.
    set_password(&store, "Noor", NOOR_PASSWORD);
    let secret_file = dir.path("proxy-secret");
    std::fs::write(&secret_file, format!("{PROXY_SECRET}\n"))?;
    let log = dir.path("stderr.log");
    let secret_arg = secret_file.display().to_string();
    // `--fresh-sign-in 0`: with single sign-on the proxy authenticates every request, so approving works.
    let more = ["--trusted-header-user", "X-Forwarded-User", "--trusted-header-secret-file", &secret_arg];
    let server = Server::logged(&table, &store, &[&more[..], &["--fresh-sign-in", "0"]].concat(), Some(&log));
    let host = server.host("Estimator");
    let p = propose_for_mia(&host, "k1", 45, "pads and a cable", "Ticket T-7");
    let fingerprint = p["fingerprint"].as_str().ok_or("fingerprint")?;

    // Naming Noor without the proxy's secret, or with a wrong one: 401, nobody signed in.
    let wrong = format!("{}x", &PROXY_SECRET[..PROXY_SECRET.len() - 1]);
    for secret in [None, Some(wrong.as_str()), Some("")] {
        let mut forged = behind_proxy(&server.url, "Noor", secret);
        for path in ["/inbox/sign-in", "/inbox/waiting", "/inbox/proposals/P-1"] {
            let page = forged.get(path);
            assert_eq!(page.status, 401, "{path} with {secret:?}: {}", page.body);
            assert!(page.body.contains("does not come from the single sign-on proxy"), "{}", page.body);
            assert!(page.set_cookies.is_empty(), "{:?}", page.set_cookies);
        }
        let page = forged
            .post("/inbox/proposals/P-1/approve", &[("csrf", "x"), ("fingerprint", fingerprint), ("how", "once")]);
        assert_eq!(page.status, 401, "{}", page.body);
    }
    // Nobody named: this inbox has no other sign-in (no password form, no password POST).
    let mut direct = Web::new(&server.url);
    assert_eq!(direct.get("/inbox/waiting").status, 401);
    assert_eq!(direct.get("/inbox/sign-in").status, 401);
    let refused = direct.post("/inbox/sign-in", &[("person", "Noor"), ("password", NOOR_PASSWORD), ("csrf", "x")]);
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(refused.body.contains("no password sign-in"), "{}", refused.body);
    assert_eq!(host.get("/v1/proposals/P-1").ok()["status"], "waiting");
    // A person the table does not know, even from the proxy: 403.
    assert_eq!(behind_proxy(&server.url, "Zed", Some(PROXY_SECRET)).get("/inbox/waiting").status, 403);

    // From the proxy: Noor is signed in (a session for the CSRF secret only) and sees Mia's proposal.
    let mut noor = behind_proxy(&server.url, "Noor", Some(PROXY_SECRET));
    let first = noor.get("/inbox/proposals/P-1");
    assert_eq!((first.status, first.location.as_deref()), (303, Some("/inbox/sign-in?next=/inbox/proposals/P-1")));
    let signed = noor.get("/inbox/sign-in?next=/inbox/proposals/P-1");
    assert_eq!((signed.status, signed.location.as_deref()), (303, Some("/inbox/proposals/P-1")), "{}", signed.body);
    assert!(noor.cookies.contains_key("permits_session"));
    let page = noor.get("/inbox/proposals/P-1");
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("Ticket T-7"), "{}", page.body);
    assert_eq!(field(&page.body, "fingerprint").as_deref(), Some(fingerprint));
    // Forms still need their CSRF token.
    let refused = noor.post("/inbox/proposals/P-1/approve", &[("fingerprint", fingerprint), ("how", "once")]);
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(refused.body.contains("CSRF"), "{}", refused.body);
    assert_eq!(host.get("/v1/proposals/P-1").ok()["status"], "waiting");
    // Noor's session cookie with the proxy naming Mia is not Noor's: Mia's own sign-in is asked for.
    let mut switched = behind_proxy(&server.url, "Mia", Some(PROXY_SECRET));
    switched.cookies = noor.cookies.clone();
    assert_eq!(switched.get("/inbox/waiting").status, 303);
    let csrf = page.csrf();
    let as_mia = switched
        .post("/inbox/proposals/P-1/approve", &[("csrf", &csrf), ("fingerprint", fingerprint), ("how", "once")]);
    assert_eq!(as_mia.status, 403, "{}", as_mia.body);
    // Noor's session cookie without the proxy: refused.
    let mut stolen = Web::new(&server.url);
    stolen.cookies = noor.cookies.clone();
    assert_eq!(stolen.get("/inbox/waiting").status, 401);
    assert_eq!(host.get("/v1/proposals/P-1").ok()["status"], "waiting");
    // With the token she approves (`--fresh-sign-in 0`: the proxy vouched for this very request).
    let done =
        noor.post("/inbox/proposals/P-1/approve", &[("csrf", &csrf), ("fingerprint", fingerprint), ("how", "once")]);
    assert_eq!((done.status, done.location.as_deref()), (303, Some("/inbox/proposals/P-1")), "{}", done.body);
    let decided = host.get("/v1/proposals/P-1").ok();
    assert_eq!(decided["status"], "granted", "{decided}");
    assert_eq!(decided["decided_by"], "Noor", "{decided}");

    // Each refusal of a forged request is logged, naming the header, never the secret.
    drop(server);
    let logged = std::fs::read_to_string(&log)?;
    let refusals = logged.lines().filter(|l| l.contains("without the proxy's secret")).count();
    assert_eq!(refusals, 3 * 4, "{logged}");
    assert!(logged.contains("refused a request naming a person in `x-forwarded-user`"), "{logged}");
    assert!(!logged.contains(PROXY_SECRET) && !logged.contains(&wrong), "{logged}");
    Ok(())
}
