//! TLS and the token check of every call.

use super::*;

/// The coordinator's TLS certificate (chain) and private key, PEM-encoded.
#[derive(Clone)]
pub struct TlsIdentity {
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
}

impl std::fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsIdentity")
            .field("cert_pem", &format_args!("{} bytes", self.cert_pem.len()))
            .field("key_pem", &format_args!("(hidden)"))
            .finish()
    }
}

impl TlsIdentity {
    /// The tonic server TLS configuration, after checking that the PEM holds a certificate and
    /// a private key that rustls accepts.
    pub fn server_config(&self) -> Result<tonic::transport::ServerTlsConfig, ServiceError> {
        let bad = |reason: String| ServiceError::Tls(reason);
        if !contains(&self.cert_pem, b"-----BEGIN CERTIFICATE-----") {
            return Err(bad("the certificate file holds no PEM certificate".into()));
        }
        if !contains(&self.key_pem, b"PRIVATE KEY-----") {
            return Err(bad("the key file holds no PEM private key".into()));
        }
        let identity = tonic::transport::Identity::from_pem(&self.cert_pem, &self.key_pem);
        let config = tonic::transport::ServerTlsConfig::new().identity(identity);
        // The certificate and key are parsed (and matched) only when a server takes them.
        tonic::transport::Server::builder()
            .tls_config(config.clone())
            .map_err(|e| bad(pb::error_chain(e.to_string(), std::error::Error::source(&e))))?;
        Ok(config)
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Checks the cluster token of every request before the service sees it.
#[derive(Clone, Debug)]
pub struct ServerAuth {
    token: Option<Arc<str>>,
}

impl ServerAuth {
    pub fn new(token: Option<&str>) -> ServerAuth {
        ServerAuth {
            token: token.map(Arc::from),
        }
    }
}

impl Interceptor for ServerAuth {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        match &self.token {
            Some(t) if !pb::auth::token_matches(request.metadata(), t) => {
                Err(ServiceError::Unauthenticated.into())
            }
            _ => Ok(request),
        }
    }
}
