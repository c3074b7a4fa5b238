//! Optional TLS (`permitd serve --tls-cert PEM --tls-key PEM`): rustls with the ring provider, TLS 1.2 and
//! 1.3, under axum's own serving loop.
//!
//! A task accepts TCP connections and runs each handshake in its own task, at most [`HANDSHAKE_TIMEOUT`]
//! long, so a slow or silent client never holds up the others; a connection whose handshake fails (plain
//! HTTP on the TLS port, an untrusted certificate at the client) is closed and never reaches a route.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// How long a client has to finish its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The server's TLS configuration from a PEM certificate chain and its PEM private key.
///
/// Errors (each naming the file): a file that cannot be read, no certificate in the chain file, no private
/// key in the key file, or a key rustls refuses (its kind, or a key that does not match the certificate).
pub fn config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, String> {
    let read = |path: &Path| std::fs::read(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()));
    let (cert_pem, key_pem) = (read(cert)?, read(key)?);
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("`--tls-cert {}` is not a PEM certificate chain: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "`--tls-cert {}` holds no PEM certificate (`-----BEGIN CERTIFICATE-----`)",
            cert.display()
        ));
    }
    let private = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| format!("`--tls-key {}` holds no PEM private key: {e}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(|e| {
            format!("`--tls-cert {}` and `--tls-key {}` do not make a TLS identity: {e}", cert.display(), key.display())
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A listener for axum's serving loop whose connections are TLS streams, handshakes done.
pub(crate) struct TlsListener {
    local: SocketAddr,
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
}

impl TlsListener {
    /// Accepts on `tcp` (in a task of the current runtime) with `config`.
    pub(crate) fn new(tcp: TcpListener, config: Arc<ServerConfig>) -> std::io::Result<TlsListener> {
        let local = tcp.local_addr()?;
        let (send, ready) = mpsc::channel(64);
        let acceptor = TlsAcceptor::from(config);
        tokio::spawn(async move {
            loop {
                let (stream, peer) = match tcp.accept().await {
                    Ok(accepted) => accepted,
                    // Out of file descriptors and the like: as axum does, wait a little and go on.
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let (acceptor, send) = (acceptor.clone(), send.clone());
                tokio::spawn(async move {
                    if let Ok(Ok(tls)) = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        let _ = send.send((tls, peer)).await;
                    }
                });
            }
        });
        Ok(TlsListener { local, ready })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(accepted) => accepted,
            // The accepting task ended (it never does on its own): nothing more is accepted.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local)
    }
}
