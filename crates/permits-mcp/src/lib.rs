//! permits in front of a Model Context Protocol server (issue #19).
//!
//! - [`import`]: connect to a server, `tools/list`, and write `.permits` declarations for its tools: typed
//!   parameters from each `inputSchema`, the widest claim for the author to confirm (the server's annotations
//!   are a comment beside it, never the claim: spec §2 "hints are never proof"), and `pinned "sha256:…"`, the
//!   digest of the whole tool object as the server sent it ([`canonical::pin`]).
//! - [`proxy`]: an MCP server on stdio for the agent, an MCP client of the upstream server, and a host of the
//!   approval service (`permitd`): `tools/list` offers only what the skill offers, not `never`, and still
//!   matching its pin; every `tools/call` goes through the service's `/v1/calls`, exactly as any remote host.
//! - [`local`]: for one person on one machine, a private `permitd` beside the proxy on a local SQLite store;
//!   [`lane`]: the proxy then runs the alone calls on that store itself (one durable transaction, no HTTP
//!   round trip), and the service makes and decides the proposals.
//!
//! The transport is JSON-RPC 2.0, hand-written on serde_json and std threads: one message per line on stdio
//! ([`jsonrpc`]) to the agent and to a server started as a command, or streamable HTTP ([`http`], [`sse`]) to
//! a server at a URL (plain `http://`; servers that need OAuth are not supported).

pub mod canonical;
pub mod http;
pub mod import;
pub mod jsonrpc;
pub mod lane;
pub mod local;
mod pipe;
pub mod proxy;
pub mod service;
pub mod sse;
pub mod upstream;

/// The MCP protocol version this crate speaks first; [`SUPPORTED_VERSIONS`] are the ones it accepts.
pub const PROTOCOL_VERSION: &str = "2025-06-18";

/// Protocol versions a client may ask for (newest first); the proxy answers with the one asked for when it is
/// here, and with [`PROTOCOL_VERSION`] otherwise.
pub const SUPPORTED_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
