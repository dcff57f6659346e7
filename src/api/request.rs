//! One API request as the handlers see it ([`ApiRequest`], [`ApiPath`]), and the checks every
//! request passes before it is routed ([`edge`]): the query string, the `Accept` header, and
//! the path's empty segments.

use super::status::{bad_request, method_not_allowed, status};
use super::store::ApiStore;
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use std::sync::Arc;

/// Longest query string accepted (the API server's limit is of the same order).
const MAX_QUERY: usize = 16 * 1024;

/// The query parameters of one request.
#[derive(Clone)]
pub(super) struct Params(pub(super) Vec<(String, String)>);

impl Params {
    /// The parameters of `uri`, checked as Go's `url.ParseQuery` checks them; the error is the
    /// 400 message.
    fn parse(uri: &Uri) -> Result<Self, String> {
        if uri.query().is_some_and(|q| q.len() > MAX_QUERY) {
            return Err("query string too long".into());
        }
        if uri.query().is_some_and(|q| !valid_escapes(q)) {
            return Err("malformed query string: invalid percent-encoding".into());
        }
        match Query::<Vec<(String, String)>>::try_from_uri(uri) {
            Ok(Query(p)) => Ok(Params(p)),
            Err(e) => Err(format!("malformed query string: {e}")),
        }
    }

    pub(super) fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub(super) fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1"))
    }

    /// A numeric parameter; the error is the 400 message.
    pub(super) fn number<T: std::str::FromStr>(&self, key: &str) -> Result<Option<T>, String> {
        match self.get(key) {
            None | Some("") => Ok(None),
            Some(v) => v
                .parse()
                .map(Some)
                .map_err(|_| format!("invalid value {v:?} for query parameter {key}")),
        }
    }
}

/// True when every `%` starts a two-digit hex escape (Go's `url.ParseQuery` rejects the
/// rest; the decoder used here would pass them through).
fn valid_escapes(query: &str) -> bool {
    let bytes = query.as_bytes();
    bytes.iter().enumerate().all(|(i, b)| {
        *b != b'%'
            || (bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
    })
}

/// What every request passes before it is routed, as the API server checks it before it
/// looks at the path: the query string (400), the `Accept` header of an API path (406). The
/// path's empty segments are dropped (`/api//v1/` is `/api/v1`), and the parsed parameters
/// are handed to [`ApiRequest`].
pub(super) async fn edge(mut request: Request, next: Next) -> Response {
    let params = match Params::parse(request.uri()) {
        Ok(p) => p,
        Err(e) => return bad_request(&e),
    };
    let path = request.uri().path();
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let api_path = matches!(segments.first(), Some(&("api" | "apis" | "version")));
    let text = segments.last() == Some(&"log");
    if api_path && !accepts(request.headers(), text) {
        let types = if text {
            "application/json, text/plain"
        } else {
            "application/json"
        };
        return status(
            StatusCode::NOT_ACCEPTABLE,
            "NotAcceptable",
            &format!("only the following media types are accepted: {types}"),
        );
    }
    let normal = format!("/{}", segments.join("/"));
    if normal != path {
        let mut parts = request.uri().clone().into_parts();
        let query = request.uri().query().map(|q| format!("?{q}"));
        let rebuilt = format!("{normal}{}", query.unwrap_or_default());
        parts.path_and_query = rebuilt.parse().ok();
        if let Ok(uri) = Uri::from_parts(parts) {
            *request.uri_mut() = uri;
        }
    }
    request.extensions_mut().insert(params);
    next.run(request).await
}

/// False when `Accept` names only media types probelet cannot write: it writes JSON (and
/// plain text for logs), not protobuf or YAML. The API server then answers 406 rather than a
/// body the client did not ask for.
fn accepts(headers: &HeaderMap, text: bool) -> bool {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    accept.split(',').any(|range| {
        let media = range.split(';').next().unwrap_or("").trim();
        let media = media.to_ascii_lowercase();
        matches!(
            media.as_str(),
            "" | "*/*" | "application/*" | "application/json"
        ) || (text && matches!(media.as_str(), "text/plain" | "text/*"))
    })
}

/// One request to the API: what every handler reads besides its path.
pub(super) struct ApiRequest {
    pub(super) store: Arc<ApiStore>,
    pub(super) method: Method,
    pub(super) headers: HeaderMap,
    pub(super) params: Params,
    pub(super) body: Bytes,
}

impl FromRequest<Arc<ApiStore>> for ApiRequest {
    type Rejection = Response;

    async fn from_request(request: Request, store: &Arc<ApiStore>) -> Result<Self, Response> {
        let method = request.method().clone();
        let headers = request.headers().clone();
        // Parsed by `edge`; parsed here when a router runs without it.
        let params = match request.extensions().get::<Params>() {
            Some(p) => p.clone(),
            None => Params::parse(request.uri()).map_err(|e| bad_request(&e))?,
        };
        let body = Bytes::from_request(request, store)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok(ApiRequest {
            store: store.clone(),
            method,
            headers,
            params,
            body,
        })
    }
}

impl ApiRequest {
    /// Only GET (and HEAD) are allowed.
    pub(super) fn read_only(&self) -> Option<Response> {
        (self.method != Method::GET && self.method != Method::HEAD)
            .then(|| method_not_allowed(&self.method))
    }

    pub(super) fn wants_table(&self) -> bool {
        self.headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("as=Table"))
    }

    pub(super) fn authorized(&self) -> bool {
        let Some(given) = self
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(crate::server::bearer_token)
        else {
            return false;
        };
        crate::server::same_secret(given.as_bytes(), self.store.token.expose().as_bytes())
    }
}

/// The path's parameters (`{ns}`, `{name}`, ...), percent-decoded; a path that does not decode
/// is a 400 `Status`, as every other error of the API.
pub(super) struct ApiPath<T>(pub(super) T);

impl<T, S> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(t)) => Ok(ApiPath(t)),
            Err(e) => Err(bad_request(&e.body_text())),
        }
    }
}
