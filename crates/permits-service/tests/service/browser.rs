//! The inbox in a real headless Chromium (Debian's `chromium` and `chromium-driver`, which `.ci/run`
//! installs when missing), driven through WebDriver with fantoccini, against the real `permitd`. Each test
//! starts its own `chromedriver` on a free loopback port and its own server. Screenshots are written to
//! `$CARGO_TARGET_TMPDIR/inbox/` (test output; `docs/inbox.png` is one of them).

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use fantoccini::{Client as Browser, ClientBuilder, Locator};
use serde_json::{Value, json};

use super::inbox::{MIA_PASSWORD, NOOR_PASSWORD, propose_for_mia, workshop};
use super::{Client, R};

/// A `chromedriver` on a free loopback port, killed when dropped.
struct Driver {
    child: Child,
    url: String,
    _profile: super::Temp,
}

impl Driver {
    fn start() -> Driver {
        let port =
            TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port");
        let child = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start chromedriver (apt-get install chromium chromium-driver): {e}"));
        let url = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(started.elapsed() < Duration::from_secs(20), "chromedriver did not listen on {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        Driver { child, url, _profile: super::Temp::new("chromium-profile") }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the browser looks like: a laptop window, or a phone's 390-pixel-wide viewport.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Screen {
    Laptop,
    Phone,
}

async fn browser(driver: &Driver, screen: Screen) -> Result<Browser, Box<dyn std::error::Error>> {
    browser_with(driver, screen, &[]).await
}

/// [`browser`] with more command-line arguments of Chromium.
async fn browser_with(driver: &Driver, screen: Screen, more: &[String]) -> Result<Browser, Box<dyn std::error::Error>> {
    let profile = driver._profile.0.display().to_string();
    let mut options = json!({
        "binary": "/usr/bin/chromium",
        "args": ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
            "--disable-background-networking", "--disable-component-update", "--disable-default-apps",
            "--disable-extensions", "--disable-sync", "--no-first-run", "--no-default-browser-check",
            "--metrics-recording-only", "--window-size=1100,1400", format!("--user-data-dir={profile}")],
    });
    if let Some(args) = options["args"].as_array_mut() {
        args.extend(more.iter().map(|a| Value::String(a.clone())));
    }
    if screen == Screen::Phone {
        options["mobileEmulation"] = json!({"deviceMetrics": {"width": 390, "height": 844, "pixelRatio": 2.0}});
    }
    let mut caps = serde_json::Map::new();
    caps.insert("goog:chromeOptions".into(), options);
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    Ok(ClientBuilder::new(connector).capabilities(caps).connect(&driver.url).await?)
}

fn shots() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("inbox");
    let _ = std::fs::create_dir_all(&dir);
    dir
}

async fn screenshot(b: &Browser, name: &str) -> R {
    std::fs::write(shots().join(format!("{name}.png")), b.screenshot().await?)?;
    Ok(())
}

/// Waits until the page's text has `needle` (after a click that navigates).
async fn wait_for_text(b: &Browser, needle: &str) -> Result<String, Box<dyn std::error::Error>> {
    let started = Instant::now();
    loop {
        // Between a click and the next page there may be no `body` yet (CI under load saw "no such element"):
        // that is "not yet", like a page that does not say it yet.
        let text = match b.find(Locator::Css("body")).await {
            Ok(body) => body.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        if text.contains(needle) {
            return Ok(text);
        }
        if started.elapsed() > Duration::from_secs(30) {
            return Err(format!("the page never said `{needle}`: {text}").into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn sign_in(b: &Browser, person: &str, password: &str) -> R {
    b.find(Locator::Css("#person")).await?.clear().await?;
    b.find(Locator::Css("#person")).await?.send_keys(person).await?;
    b.find(Locator::Css("#password")).await?.send_keys(password).await?;
    b.find(Locator::Css("#sign-in")).await?.click().await?;
    Ok(())
}

fn run<F: std::future::Future<Output = R>>(f: F) -> R {
    tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(f)
}

/// The workshop's host: waits on the proposal (long poll), then claims, confirms and reports the receipt
/// once it is granted, counting the runs. A second claim with another token must be refused.
fn host_waits_and_runs(host: Client, runs: Arc<AtomicU32>) -> std::thread::JoinHandle<Value> {
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let p = host.get("/v1/proposals/P-1?wait=30&status=waiting").ok();
            if p["status"] == "granted" {
                break;
            }
            assert!(p["status"] == "waiting" && Instant::now() < deadline, "the proposal became {}", p["status"]);
        }
        let claim = host.post("/v1/executions/P-1/claim", &json!({"token": "host-1", "covered_version": "r1"}));
        assert_eq!(claim.status, 200, "{}", claim.body);
        assert_eq!(claim.body["runs_as"], "Noor");
        let sent = host.post("/v1/executions/P-1/confirm", &json!({"token": "host-1"})).ok();
        runs.fetch_add(1, Ordering::SeqCst);
        let price = sent["arguments"]["price"].clone();
        let done = host
            .post(
                "/v1/executions/P-1/receipt",
                &json!({"token": "host-1", "outcome": "done", "receipt": {"price": price}}),
            )
            .ok();
        // Another host's claim with another token: refused; the same token again: the same receipt.
        let again = host.post("/v1/executions/P-1/claim", &json!({"token": "host-2", "covered_version": "r1"}));
        assert_eq!(again.status, 409, "{}", again.body);
        done
    })
}

#[test]
fn noor_signs_in_sees_mia_s_set_price_approves_and_the_host_runs_it_once() -> R {
    let (server, _dir) = workshop(&[], None);
    let host = server.host("Estimator");
    propose_for_mia(&host, "k1", 45, "Pads, a cable and an hour of work.", "Ticket T-7");
    let runs = Arc::new(AtomicU32::new(0));
    let waiting_host = host_waits_and_runs(host.clone(), runs.clone());
    let driver = Driver::start();
    run(async {
        let b = browser(&driver, Screen::Laptop).await?;
        b.goto(&format!("{}/inbox/waiting", server.url)).await?;
        wait_for_text(&b, "Sign in").await?;
        assert!(b.current_url().await?.as_str().contains("/inbox/sign-in?next=/inbox/waiting"));
        sign_in(&b, "Noor", NOOR_PASSWORD).await?;
        let list = wait_for_text(&b, "Waiting for you").await?;
        assert!(list.contains("1 waiting: 1 routed to you"), "{list}");
        assert!(list.contains("Set the price"), "{list}");
        b.find(Locator::Css("#waiting a")).await?.click().await?;
        let page = wait_for_text(&b, "What it would do").await?;
        let arguments = b.find(Locator::Css("#arguments")).await?.text().await?;
        assert!(arguments.contains("Ticket T-7"), "{arguments}");
        assert!(arguments.contains("45"), "{arguments}");
        assert!(page.contains("You may decide it."), "{page}");
        assert!(page.contains("Waiting on a decision from Noor"), "{page}");
        screenshot(&b, "proposal-laptop").await?;
        assert_eq!(runs.load(Ordering::SeqCst), 0, "nothing runs before the yes");
        b.find(Locator::Css("#approve-once")).await?.click().await?;
        let after = wait_for_text(&b, "approved by Noor").await?;
        // The waiting host may already have claimed it by the time the page is drawn.
        let status = b.find(Locator::Css("#status")).await?.text().await?;
        assert!(["granted", "sending", "done"].contains(&status.as_str()), "{status}: {after}");
        b.close().await?;
        Ok(())
    })?;
    let done = waiting_host.join().map_err(|_| "the host panicked")?;
    assert_eq!(done["status"], "done", "{done}");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the host's claim ran exactly once");
    Ok(())
}

#[test]
fn mia_sees_her_routed_proposal_with_who_decides_and_no_approve_button() -> R {
    let (server, _dir) = workshop(&[], None);
    let host = server.host("Estimator");
    let p = propose_for_mia(&host, "k1", 45, "Pads, a cable and an hour of work.", "Ticket T-7");
    let refusal = server.person("Mia").post("/v1/proposals/P-1/approve", &json!({"fingerprint": p["fingerprint"]}));
    assert_eq!(refusal.status, 403);
    let driver = Driver::start();
    run(async {
        let b = browser(&driver, Screen::Laptop).await?;
        b.goto(&format!("{}/inbox/sign-in", server.url)).await?;
        sign_in(&b, "Mia", MIA_PASSWORD).await?;
        let list = wait_for_text(&b, "Waiting for you").await?;
        assert!(list.contains("1 your requests, decided by others"), "{list}");
        assert!(list.contains("Your request, waiting on a decision from Noor"), "{list}");
        b.goto(&format!("{}/inbox/proposals/P-1", server.url)).await?;
        wait_for_text(&b, "Who decides").await?;
        let who = b.find(Locator::Css("#who-decides")).await?.text().await?;
        assert!(
            who.contains("Waiting on a decision from Noor: skill PriceFleetRepair routes SetPrice to person Noor"),
            "{who}"
        );
        let not_yours = b.find(Locator::Css("#not-yours")).await?.text().await?;
        assert_eq!(not_yours, format!("You cannot decide it: {}", refusal.message()));
        assert!(b.find_all(Locator::Css("#approve-once, #approve-task, #approve-always, #reject")).await?.is_empty());
        screenshot(&b, "routed-to-someone-else").await?;
        b.close().await?;
        Ok(())
    })
}

#[test]
fn a_form_posted_without_its_csrf_token_is_refused() -> R {
    let (server, _dir) = workshop(&[], None);
    let host = server.host("Estimator");
    propose_for_mia(&host, "k1", 45, "Pads, a cable and an hour of work.", "Ticket T-7");
    let driver = Driver::start();
    run(async {
        let b = browser(&driver, Screen::Laptop).await?;
        b.goto(&format!("{}/inbox/proposals/P-1", server.url)).await?;
        sign_in(&b, "Noor", NOOR_PASSWORD).await?;
        wait_for_text(&b, "What it would do").await?;
        // The approve form as a forged page would post it: without its token.
        b.execute("document.querySelector('#approve-once').form.querySelector('[name=csrf]').remove()", vec![]).await?;
        b.find(Locator::Css("#approve-once")).await?.click().await?;
        let refused = wait_for_text(&b, "CSRF token is missing").await?;
        assert!(refused.contains("Forbidden"), "{refused}");
        b.close().await?;
        Ok(())
    })?;
    assert_eq!(host.get("/v1/proposals/P-1").ok()["status"], "waiting");
    Ok(())
}

#[test]
fn an_old_session_signs_in_again_before_approving() -> R {
    let (server, _dir) = workshop(&["--fresh-sign-in", "2"], None);
    let host = server.host("Estimator");
    propose_for_mia(&host, "k1", 45, "Pads, a cable and an hour of work.", "Ticket T-7");
    let driver = Driver::start();
    run(async {
        let b = browser(&driver, Screen::Laptop).await?;
        b.goto(&format!("{}/inbox/proposals/P-1", server.url)).await?;
        sign_in(&b, "Noor", NOOR_PASSWORD).await?;
        wait_for_text(&b, "What it would do").await?;
        tokio::time::sleep(Duration::from_millis(3100)).await;
        b.refresh().await?;
        let page = wait_for_text(&b, "asks for your password again").await?;
        assert!(page.contains("the limit is 2 s"), "{page}");
        b.find(Locator::Css("#approve-once")).await?.click().await?;
        let note = wait_for_text(&b, "approving needs a fresh sign-in").await?;
        assert!(note.contains("Sign in again, then approve"), "{note}");
        assert_eq!(b.find(Locator::Css("#person")).await?.attr("value").await?.as_deref(), Some("Noor"));
        assert_eq!(host.get("/v1/proposals/P-1").ok()["status"], "waiting");
        b.find(Locator::Css("#password")).await?.send_keys(NOOR_PASSWORD).await?;
        b.find(Locator::Css("#sign-in")).await?.click().await?;
        wait_for_text(&b, "What it would do").await?;
        b.find(Locator::Css("#approve-once")).await?.click().await?;
        wait_for_text(&b, "approved by Noor").await?;
        b.close().await?;
        Ok(())
    })?;
    assert_eq!(host.get("/v1/proposals/P-1").ok()["status"], "granted");
    Ok(())
}

#[test]
fn a_phone_shows_the_approve_button_without_horizontal_scrolling() -> R {
    let (server, _dir) = workshop(&[], None);
    let host = server.host("Estimator");
    let long = "Pads, a cable and an hour of work: the-rear-brake-cable-is-frayed-at-the-lever-and-must-be-replaced-before-the-ride";
    propose_for_mia(&host, "k1", 45, long, "Ticket T-7");
    let driver = Driver::start();
    run(async {
        let b = browser(&driver, Screen::Phone).await?;
        b.goto(&format!("{}/inbox/proposals/P-1", server.url)).await?;
        sign_in(&b, "Noor", NOOR_PASSWORD).await?;
        wait_for_text(&b, "What it would do").await?;
        let width = b.execute("return [window.innerWidth, document.documentElement.scrollWidth]", vec![]).await?;
        assert_eq!(width[0], 390, "the viewport is a phone's: {width}");
        assert!(width[1].as_f64().is_some_and(|w| w <= 390.0), "the page scrolls sideways: {width}");
        screenshot(&b, "proposal-phone").await?;
        let rect = b
            .execute(
                "const e = document.querySelector('#approve-once'); e.scrollIntoView({block: 'center'});
                 const r = e.getBoundingClientRect();
                 return [r.left, r.right, r.top, r.bottom, window.innerWidth, window.innerHeight];",
                vec![],
            )
            .await?;
        let n = |i: usize| rect[i].as_f64().unwrap_or(f64::NAN);
        assert!(
            n(0) >= 0.0 && n(1) <= n(4) && n(2) >= 0.0 && n(3) <= n(5),
            "the button is outside the viewport: {rect}"
        );
        screenshot(&b, "proposal-phone-decide").await?;
        b.close().await?;
        Ok(())
    })
}

#[test]
fn noor_adds_a_second_factor_and_signs_in_with_its_code() -> R {
    let (server, _dir) = workshop(&[], None);
    let driver = Driver::start();
    run(async {
        let b = browser(&driver, Screen::Laptop).await?;
        b.goto(&format!("{}/inbox/totp", server.url)).await?;
        sign_in(&b, "Noor", NOOR_PASSWORD).await?;
        wait_for_text(&b, "Add a one-time code").await?;
        let secret = b.find(Locator::Css("#totp-secret")).await?.text().await?;
        let uri = b.find(Locator::Css("#totp-uri")).await?.text().await?;
        assert!(uri.starts_with(&format!("otpauth://totp/permits:Noor?secret={secret}&issuer=permits")), "{uri}");
        screenshot(&b, "second-factor").await?;
        b.find(Locator::Css("#totp-code")).await?.send_keys(&super::inbox::totp_code(&secret, 0)).await?;
        b.find(Locator::Css("#totp-confirm")).await?.click().await?;
        wait_for_text(&b, "Your second factor is on").await?;
        // Signed out, the password alone no longer signs her in; with the code of the next step it does.
        b.find(Locator::Css("header button")).await?.click().await?;
        wait_for_text(&b, "One-time code").await?;
        sign_in(&b, "Noor", NOOR_PASSWORD).await?;
        let refused = wait_for_text(&b, "one-time code is missing").await?;
        assert!(refused.contains("Sign in"), "{refused}");
        b.find(Locator::Css("#password")).await?.send_keys(NOOR_PASSWORD).await?;
        b.find(Locator::Css("#code")).await?.send_keys(&super::inbox::totp_code(&secret, 1)).await?;
        b.find(Locator::Css("#sign-in")).await?.click().await?;
        wait_for_text(&b, "Waiting for you").await?;
        b.close().await?;
        Ok(())
    })
}

#[test]
fn over_https_with_a_second_factor_required_noor_must_add_one_before_her_inbox() -> R {
    let certs = super::Temp::new("browser-tls");
    let (cert, key) = super::sign_in::certificate(&certs, "server");
    let (cert_arg, key_arg) = (cert.display().to_string(), key.display().to_string());
    let (server, _dir) = workshop(&["--tls-cert", &cert_arg, "--tls-key", &key_arg, "--require-totp"], None);
    assert!(server.url.starts_with("https://"), "{}", server.url);
    // The host over HTTPS, trusting the same certificate.
    let token = server.key(&["--agents", "Estimator"]);
    let host = Client { base: server.url.clone(), token, agent: super::sign_in::trusting(&cert) };
    propose_for_mia(&host, "k1", 45, "pads and a cable", "Ticket T-7");
    // Chromium trusts exactly this certificate (by its public key's SHA-256), no other.
    let spki = format!("--ignore-certificate-errors-spki-list={}", super::sign_in::spki_sha256(&cert));
    let driver = Driver::start();
    run(async {
        let b = browser_with(&driver, Screen::Phone, &[spki]).await?;
        b.goto(&format!("{}/inbox/proposals/P-1", server.url)).await?;
        wait_for_text(&b, "One-time code").await?;
        sign_in(&b, "Noor", NOOR_PASSWORD).await?;
        // Her `Secure` session cookie came back over HTTPS: she is signed in, but only to add a second factor.
        let page = wait_for_text(&b, "requires a second factor").await?;
        assert!(page.contains("Add a one-time code"), "{page}");
        b.goto(&format!("{}/inbox/waiting", server.url)).await?;
        wait_for_text(&b, "Add a one-time code").await?;
        let secret = b.find(Locator::Css("#totp-secret")).await?.text().await?;
        b.find(Locator::Css("#totp-code")).await?.send_keys(&super::inbox::totp_code(&secret, 0)).await?;
        b.find(Locator::Css("#totp-confirm")).await?.click().await?;
        wait_for_text(&b, "Your second factor is on").await?;
        b.goto(&format!("{}/inbox/proposals/P-1", server.url)).await?;
        wait_for_text(&b, "Ticket T-7").await?;
        b.find(Locator::Css("#approve-once")).await?.click().await?;
        wait_for_text(&b, "approved by Noor").await?;
        assert_eq!(host.get("/v1/proposals/P-1").ok()["status"], "granted");
        b.close().await?;
        Ok(())
    })
}

/// The proposal page shows a delegated call's chain (spec §3b), root first down to the calling agent, each
/// with its skill, and a call's mode (spec §3c): Ben sees the Researcher's WebFetch delegated by Coder in
/// FixBug, and Coder's GitPush made in mode Unattended, which has no chain.
#[test]
fn ben_sees_the_delegation_chain_and_the_mode_on_the_proposal_page() -> R {
    let dir = super::Temp::new("inbox-desk");
    let table = dir.path("table.json");
    std::fs::copy(super::fixture("research-desk"), &table)?;
    let store = dir.path("ledger.db");
    super::inbox::set_password(&store, "Ben", "ben-secret-password-333");
    let server = super::Server::logged(&table, &store, &[], None);
    let host = server.host("Coder,Researcher");
    let fetch = host
        .post(
            "/v1/calls",
            &json!({"agent": "Researcher", "skill": "Look", "tool": "WebFetch", "arguments": {"url": "https://a.example/x"},
                    "requester": "Ben", "via": [{"agent": "Coder", "skill": "FixBug"}], "operation_key": "T1",
                    "claim_token": "tok-1", "why": "look it up"}),
        )
        .ok();
    assert_eq!(fetch["proposal"]["id"], "P-1");
    let push = host
        .post(
            "/v1/calls",
            &json!({"agent": "Coder", "skill": "FixBug", "tool": "GitPush", "arguments": {"branch": "fix-1"},
                    "requester": "Ben", "mode": "Unattended", "operation_key": "T2", "claim_token": "tok-2",
                    "why": "push the fix"}),
        )
        .ok();
    assert_eq!(push["proposal"]["id"], "P-2");
    let driver = Driver::start();
    run(async {
        let b = browser(&driver, Screen::Laptop).await?;
        b.goto(&format!("{}/inbox/sign-in", server.url)).await?;
        sign_in(&b, "Ben", "ben-secret-password-333").await?;
        wait_for_text(&b, "Waiting for you").await?;
        b.goto(&format!("{}/inbox/proposals/P-1", server.url)).await?;
        let page = wait_for_text(&b, "Delegated").await?;
        let chain = b.find(Locator::Css("#chain")).await?.text().await?;
        assert_eq!(chain, "Coder in FixBug → Researcher in Look");
        assert!(!page.contains("Mode"), "no mode: {page}");
        screenshot(&b, "delegated-proposal").await?;
        b.goto(&format!("{}/inbox/proposals/P-2", server.url)).await?;
        let page = wait_for_text(&b, "Mode").await?;
        assert!(page.contains("Mode\nUnattended") || page.contains("Mode Unattended"), "{page}");
        assert!(b.find_all(Locator::Css("#chain")).await?.is_empty(), "a direct call has no chain");
        b.close().await?;
        Ok(())
    })
}
