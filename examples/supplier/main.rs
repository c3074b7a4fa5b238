//! The supplier test peer of the shop-spending scenario (`shared/cases/shop-spending.md`): a small HTTP
//! service on loopback, run as a separate process with its own SQLite database, that records every order it
//! accepts, keyed by operation id. Tests count what reached the supplier by asking it, not by trusting the
//! host's local state.
//!
//! Usage: `supplier --db PATH [--port N]` (port 0 or absent: any free port). It binds 127.0.0.1, prints one
//! line `listening on http://127.0.0.1:PORT` to stdout, then serves until killed or until `POST /shutdown`.
//!
//! Endpoints (JSON in and out):
//! - `POST /orders` `{"operation", "sku", "quantity", "amount"}`: a new operation id is accepted and numbered;
//!   the same id with the same content returns the same receipt; the same id with other content is refused
//!   (409). Malformed input is a 400 with `{"error": "..."}`.
//! - `GET /orders`: every accepted order, in order-number order.
//! - `GET /health`: `{"ok": true}`.
//! - `POST /shutdown`: answers, then the process exits 0.
//!
//! The client the host and the tests use is `examples/supplier/client.rs`.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde_json::{Map, Value, json};
use tiny_http::{Header, Method, Request, Response, Server};

/// The largest request body the peer reads; an order is a few dozen bytes.
const MAX_BODY: u64 = 64 * 1024;

fn main() -> ExitCode {
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(message) => {
            eprintln!("supplier: {message}");
            eprintln!("usage: supplier --db PATH [--port N]");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("supplier: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The command line: where the database lives and which port to bind (0: any free port).
struct Args {
    db: PathBuf,
    port: u16,
}

impl Args {
    fn parse(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
        let mut db = None;
        let mut port = 0;
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--db" => db = Some(PathBuf::from(args.next().ok_or("`--db` needs a path")?)),
                "--port" => {
                    let value = args.next().ok_or("`--port` needs a number")?;
                    port = value.parse().map_err(|_| format!("`{value}` is not a port number"))?;
                }
                other => return Err(format!("unknown argument `{other}`")),
            }
        }
        let db = db.ok_or("`--db PATH` is required")?;
        Ok(Args { db, port })
    }
}

fn run(args: &Args) -> Result<(), String> {
    let mut conn = open(&args.db).map_err(|e| format!("cannot open `{}`: {e}", args.db.display()))?;
    let server = Server::http(("127.0.0.1", args.port)).map_err(|e| format!("cannot bind: {e}"))?;
    let port = server.server_addr().to_ip().map(|addr| addr.port()).ok_or("the server has no IP address")?;
    // The test reads this one line to find the port, so it must be flushed before anything is served.
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on http://127.0.0.1:{port}").map_err(|e| e.to_string())?;
    stdout.flush().map_err(|e| e.to_string())?;
    drop(stdout);

    for mut request in server.incoming_requests() {
        let (status, body, then) = handle(&mut conn, &mut request);
        let response = Response::from_string(body.to_string()).with_status_code(status).with_header(json_header());
        // A client that went away is its own problem; the peer keeps serving the others.
        let _ = request.respond(response);
        if let Then::Exit = then {
            return Ok(());
        }
    }
    Ok(())
}

/// Whether the peer keeps serving after a response.
enum Then {
    Serve,
    Exit,
}

fn open(path: &std::path::Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    // `journal_mode` answers with the mode it set, so it is a query, not a plain statement.
    let _: String = conn.query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))?;
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS orders (
            operation TEXT PRIMARY KEY,
            sku TEXT NOT NULL,
            quantity INTEGER NOT NULL,
            amount INTEGER NOT NULL,
            order_number INTEGER NOT NULL,
            received_at TEXT
        );",
    )?;
    Ok(conn)
}

fn json_header() -> Header {
    Header::from_bytes(&b"Content-Type"[..], &b"application/json"[..])
        .unwrap_or_else(|()| unreachable!("a constant, valid header"))
}

fn handle(conn: &mut Connection, request: &mut Request) -> (u16, Value, Then) {
    // The query string plays no part in any endpoint.
    let path = request.url().split('?').next().unwrap_or_default().to_owned();
    let method = request.method().clone();
    match (path.as_str(), &method) {
        ("/orders", Method::Post) => {
            let (status, body) = match read_order(request) {
                Ok(order) => place(conn, &order),
                Err(message) => (400, json!({ "error": message })),
            };
            (status, body, Then::Serve)
        }
        ("/orders", Method::Get) => {
            let (status, body) = match list(conn) {
                Ok(orders) => (200, json!({ "orders": orders })),
                Err(e) => (500, json!({ "error": format!("database: {e}") })),
            };
            (status, body, Then::Serve)
        }
        ("/health", Method::Get) => (200, json!({ "ok": true }), Then::Serve),
        ("/shutdown", Method::Post) => (200, json!({ "ok": true, "shutting_down": true }), Then::Exit),
        ("/orders" | "/health" | "/shutdown", _) => {
            (405, json!({ "error": format!("`{method}` is not allowed on `{path}`") }), Then::Serve)
        }
        _ => (404, json!({ "error": format!("no such path `{path}`") }), Then::Serve),
    }
}

/// One order as the client sent it, validated.
#[derive(PartialEq, Eq)]
struct Order {
    operation: String,
    sku: String,
    quantity: i64,
    amount: i64,
}

impl Order {
    fn receipt(&self, number: i64) -> Value {
        json!({
            "operation": self.operation,
            "order": number,
            "sku": self.sku,
            "quantity": self.quantity,
            "amount": self.amount,
            "outcome": "accepted",
        })
    }
}

fn read_order(request: &mut Request) -> Result<Order, String> {
    let mut text = String::new();
    request
        .as_reader()
        .take(MAX_BODY + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read the body: {e}"))?;
    if text.len() as u64 > MAX_BODY {
        return Err(format!("the body is larger than {MAX_BODY} bytes"));
    }
    let value: Value = serde_json::from_str(&text).map_err(|e| format!("the body is not JSON: {e}"))?;
    let Value::Object(fields) = value else {
        return Err("the body must be a JSON object".to_owned());
    };
    if let Some(extra) = fields.keys().find(|k| !["operation", "sku", "quantity", "amount"].contains(&k.as_str())) {
        return Err(format!("unknown field `{extra}`"));
    }
    Ok(Order {
        operation: text_field(&fields, "operation")?,
        sku: text_field(&fields, "sku")?,
        quantity: count_field(&fields, "quantity")?,
        amount: count_field(&fields, "amount")?,
    })
}

fn text_field(fields: &Map<String, Value>, name: &str) -> Result<String, String> {
    match fields.get(name) {
        None => Err(format!("missing field `{name}`")),
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(_) => Err(format!("`{name}` must be a non-empty string")),
    }
}

fn count_field(fields: &Map<String, Value>, name: &str) -> Result<i64, String> {
    match fields.get(name) {
        None => Err(format!("missing field `{name}`")),
        Some(value) => match value.as_i64() {
            Some(n) if n >= 0 => Ok(n),
            _ => Err(format!("`{name}` must be a non-negative integer")),
        },
    }
}

/// Accepts a new operation, replays a known one, or refuses a known id with other content. The lookup and
/// the insert share one IMMEDIATE transaction, so two peers on one database cannot both number an order.
fn place(conn: &mut Connection, order: &Order) -> (u16, Value) {
    match place_in_transaction(conn, order) {
        Ok(Placed::Accepted(number) | Placed::Replayed(number)) => (200, order.receipt(number)),
        Ok(Placed::Conflict) => (
            409,
            json!({
                "operation": order.operation,
                "outcome": "refused",
                "error": format!("operation `{}` was already used for other content", order.operation),
            }),
        ),
        Err(e) => (500, json!({ "error": format!("database: {e}") })),
    }
}

/// What `POST /orders` did with an order: the order number it holds, or a refusal.
enum Placed {
    Accepted(i64),
    Replayed(i64),
    Conflict,
}

fn place_in_transaction(conn: &mut Connection, order: &Order) -> rusqlite::Result<Placed> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let known = tx
        .query_row(
            "SELECT sku, quantity, amount, order_number FROM orders WHERE operation = ?1",
            params![order.operation],
            |row| {
                let stored = Order {
                    operation: order.operation.clone(),
                    sku: row.get(0)?,
                    quantity: row.get(1)?,
                    amount: row.get(2)?,
                };
                Ok((stored, row.get::<_, i64>(3)?))
            },
        )
        .optional()?;
    let placed = match known {
        Some((stored, number)) if stored == *order => Placed::Replayed(number),
        Some(_) => Placed::Conflict,
        None => {
            let count: i64 = tx.query_row("SELECT COUNT(*) FROM orders", [], |row| row.get(0))?;
            tx.execute(
                "INSERT INTO orders (operation, sku, quantity, amount, order_number, received_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
                params![order.operation, order.sku, order.quantity, order.amount, count + 1],
            )?;
            Placed::Accepted(count + 1)
        }
    };
    // Dropping an uncommitted transaction rolls it back, so every early return above leaves nothing behind.
    tx.commit()?;
    Ok(placed)
}

fn list(conn: &Connection) -> rusqlite::Result<Vec<Value>> {
    let mut statement =
        conn.prepare("SELECT operation, sku, quantity, amount, order_number FROM orders ORDER BY order_number")?;
    let rows = statement.query_map([], |row| {
        let order = Order { operation: row.get(0)?, sku: row.get(1)?, quantity: row.get(2)?, amount: row.get(3)? };
        Ok(order.receipt(row.get(4)?))
    })?;
    rows.collect()
}
