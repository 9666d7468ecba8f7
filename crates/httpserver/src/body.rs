//! The one limit on request bodies (issue 42 point 9): every body the JSON API, the MCP
//! endpoint and the cluster routing read is at most [`MAX_REQUEST_BODY_BYTES`], refused with
//! a 413 as soon as the limit is known to be passed (from `Content-Length`, or once that much
//! has arrived), never buffered whole first; and a JSON body may hold at most
//! [`MAX_JSON_VALUES`] values, checked by a scan that builds nothing, before a handler parses
//! it into a `serde_json::Value` tree (which takes some 16 bytes of memory per byte of
//! `[0,0,…]`).
//!
//! A tool's arguments are a few names, paths and numbers: both limits are far above what any
//! call needs, and far below what would let a few callers exhaust the server's memory.

use crate::json::ApiError;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode, header};
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess};
use std::cell::Cell;
use tokio_stream::StreamExt as _;

/// The biggest request body the JSON API (every route under `/sourcegraph/api/`), the MCP
/// endpoint and the cluster routing read: 2 MiB, the JSON API's limit before it had one of
/// its own (axum's default).
pub const MAX_REQUEST_BODY_BYTES: usize = 2 * 1024 * 1024;

/// The most values (strings, numbers, arrays, objects and object keys, nested ones included)
/// a JSON body of the JSON API or the MCP endpoint may hold. A `read_many` of the most items
/// holds a few hundred.
pub const MAX_JSON_VALUES: usize = 10_000;

/// Marks a request whose body was read and checked here, so a second layer of the same
/// check (the binary's around the whole app, the API router's own) does not redo it.
#[derive(Debug, Clone, Copy)]
struct Checked;

/// `app` with [`MAX_REQUEST_BODY_BYTES`] and [`MAX_JSON_VALUES`] applied to every request
/// body under `/sourcegraph/api/` and `/sourcegraph/mcp`: the JSON API's router has it
/// already; the binary wraps the whole app (the MCP endpoint it mounts included). Put it
/// inside the access layer: a caller refused there never has its body read.
pub fn with_body_limit<S: Clone + Send + Sync + 'static>(app: Router<S>) -> Router<S> {
    app.layer(axum::middleware::from_fn(limit))
}

/// Whether the request's body falls under the limit: the JSON API's and the MCP endpoint's.
pub(crate) fn limited(path: &str) -> bool {
    path.starts_with("/sourcegraph/api/") || path.starts_with("/sourcegraph/mcp")
}

async fn limit(request: Request, next: Next) -> Response {
    let empty = axum::body::HttpBody::size_hint(request.body()).exact() == Some(0);
    if empty || !limited(request.uri().path()) || request.extensions().get::<Checked>().is_some() {
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    let bytes = match read_limited(&parts.headers, body).await {
        Ok(bytes) => bytes,
        Err(refused) => return refused,
    };
    if too_many_json_values(&bytes) {
        return ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_argument",
            format!(
                "the request body holds more than {MAX_JSON_VALUES} JSON values, this \
                 server's limit; a call's arguments need far fewer: split the call into \
                 several"
            ),
        )
        .into_response();
    }
    parts.extensions.insert(Checked);
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// The body whole, if it is at most [`MAX_REQUEST_BODY_BYTES`]; else the 413 to answer, as
/// soon as that is known: at once when `Content-Length` says so, else once more than the
/// limit has arrived (what arrived is dropped, the rest never read).
pub(crate) async fn read_limited(headers: &HeaderMap, body: Body) -> Result<Bytes, Response> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|length| length > MAX_REQUEST_BODY_BYTES as u64) {
        return Err(too_large().into_response());
    }
    let mut stream = body.into_data_stream();
    // The common body arrives in one piece, kept as it came; pieces are joined only when
    // there are more, in a buffer that never grows past the limit.
    let mut first: Option<Bytes> = None;
    let mut joined: Vec<u8> = Vec::new();
    while let Some(piece) = stream.next().await {
        let piece = piece.map_err(|_| cut_off())?;
        let held = first.as_ref().map_or(joined.len(), Bytes::len);
        if piece.len() > MAX_REQUEST_BODY_BYTES - held {
            return Err(too_large().into_response());
        }
        if held == 0 {
            first = Some(piece);
            continue;
        }
        if let Some(first) = first.take() {
            let expected = declared.map_or(2 * first.len(), |length| length as usize);
            joined.reserve_exact(expected.clamp(held + piece.len(), MAX_REQUEST_BODY_BYTES));
            joined.extend_from_slice(&first);
        }
        if joined.capacity() - joined.len() < piece.len() {
            let grown = (2 * joined.capacity()).min(MAX_REQUEST_BODY_BYTES);
            joined.reserve_exact(grown.max(joined.len() + piece.len()) - joined.len());
        }
        joined.extend_from_slice(&piece);
    }
    Ok(first.unwrap_or_else(|| Bytes::from(joined)))
}

/// The 413 of a body over [`MAX_REQUEST_BODY_BYTES`]: the limit, and what to do.
pub(crate) fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "invalid_argument",
        format!(
            "the request body is larger than {} MiB ({MAX_REQUEST_BODY_BYTES} bytes), this \
             server's limit; a call's arguments need far less: send only the arguments, and \
             split a big batch into several calls",
            MAX_REQUEST_BODY_BYTES >> 20
        ),
    )
}

fn cut_off() -> Response {
    ApiError::bad_request(
        "the request body was cut off or its framing is broken; send the request again whole",
    )
    .into_response()
}

/// Whether `body` is JSON with more than [`MAX_JSON_VALUES`] values, counted without
/// building any (a body that is not JSON is left to its handler to refuse).
pub(crate) fn too_many_json_values(body: &[u8]) -> bool {
    let left = Cell::new(MAX_JSON_VALUES);
    let exceeded = Cell::new(false);
    let census = Census {
        left: &left,
        exceeded: &exceeded,
    };
    let _ = census.deserialize(&mut serde_json::Deserializer::from_slice(body));
    exceeded.get()
}

/// Counts the values of a JSON document against what is left of the allowance, and stops the
/// scan (with an error) once it is spent.
#[derive(Clone, Copy)]
struct Census<'c> {
    left: &'c Cell<usize>,
    exceeded: &'c Cell<bool>,
}

impl Census<'_> {
    fn count<E: de::Error>(self) -> Result<(), E> {
        match self.left.get().checked_sub(1) {
            Some(left) => {
                self.left.set(left);
                Ok(())
            }
            None => {
                self.exceeded.set(true);
                Err(E::custom("too many values"))
            }
        }
    }
}

impl<'de> DeserializeSeed<'de> for Census<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> de::Visitor<'de> for Census<'_> {
    type Value = ();

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.count()
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.count()
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.count()
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.count()
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.count()
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.count()
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.count()
    }
    fn visit_some<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.count()?;
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.count()?;
        while map.next_key_seed(self)?.is_some() {
            map.next_value_seed(self)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_every_value_nested_ones_and_keys_included() {
        let values = |n: usize| format!("[{}]", vec!["0"; n].join(","));
        // The array itself and its elements.
        assert!(!too_many_json_values(
            values(MAX_JSON_VALUES - 1).as_bytes()
        ));
        assert!(too_many_json_values(values(MAX_JSON_VALUES).as_bytes()));
        let pairs = (0..MAX_JSON_VALUES / 2)
            .map(|i| format!("\"k{i}\":{{}}"))
            .collect::<Vec<_>>()
            .join(",");
        assert!(too_many_json_values(format!("{{{pairs}}}").as_bytes()));
        let call = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"repo":"acme/web","path":"a","start_line":1}}}"#;
        assert!(!too_many_json_values(call));
        // Not JSON: the handler says what is wrong with it.
        assert!(!too_many_json_values(b"{\"repo\":"));
        assert!(!too_many_json_values(b"repo=acme"));
    }
}
