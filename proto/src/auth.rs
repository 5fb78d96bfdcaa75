//! The cluster token: every RPC carries `authorization: Bearer TOKEN` metadata. Clients add it
//! with [`ClientAuth`]; the coordinator checks it with [`token_matches`].

use tonic::metadata::{AsciiMetadataValue, MetadataMap};
use tonic::service::Interceptor;
use tonic::{Request, Status};

/// The metadata key that carries the token.
pub const AUTHORIZATION: &str = "authorization";

/// A token that cannot be sent as gRPC metadata (not visible ASCII).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the cluster token must be printable ASCII without spaces")]
pub struct BadToken;

/// Adds the cluster token to every request of a client (nothing when there is no token).
#[derive(Clone, Debug, Default)]
pub struct ClientAuth {
    header: Option<AsciiMetadataValue>,
}

impl ClientAuth {
    pub fn new(token: Option<&str>) -> Result<ClientAuth, BadToken> {
        let header = match token {
            None => None,
            Some(t) if t.is_empty() || !t.bytes().all(|b| b.is_ascii_graphic()) => return Err(BadToken),
            Some(t) => Some(format!("Bearer {t}").parse().map_err(|_| BadToken)?),
        };
        Ok(ClientAuth { header })
    }
}

impl Interceptor for ClientAuth {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(h) = &self.header {
            request.metadata_mut().insert(AUTHORIZATION, h.clone());
        }
        Ok(request)
    }
}

/// True when the metadata carries `Bearer {expected}` (compared in constant time).
pub fn token_matches(metadata: &MetadataMap, expected: &str) -> bool {
    let Some(value) = metadata.get(AUTHORIZATION).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let Some(given) = value.strip_prefix("Bearer ") else {
        return false;
    };
    let (a, b) = (given.as_bytes(), expected.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(token: Option<&str>) -> MetadataMap {
        let mut auth = ClientAuth::new(token).unwrap();
        auth.call(Request::new(())).unwrap().metadata().clone()
    }

    #[test]
    fn the_right_token_matches_and_others_do_not() {
        assert!(token_matches(&sent(Some("s3cret")), "s3cret"));
        assert!(!token_matches(&sent(Some("s3cre")), "s3cret"));
        assert!(!token_matches(&sent(Some("s3cret!")), "s3cret"));
        assert!(!token_matches(&sent(None), "s3cret"));
    }

    #[test]
    fn tokens_with_spaces_are_refused() {
        assert_eq!(ClientAuth::new(Some("a b")).unwrap_err(), BadToken);
        assert_eq!(ClientAuth::new(Some("")).unwrap_err(), BadToken);
    }
}
