//! The slice of HTTP/1.1 the admin endpoint speaks: request heads parsed
//! with `httparse` under fixed bounds, and `Connection: close` responses.
//!
//! One request per connection: every answer carries `Connection: close`
//! and the server closes after writing it. Probes and Prometheus reconnect
//! per scrape happily, and it keeps a connection's life one bounded pass
//! (read the head, read and drop the body, answer, close).
//!
//! # Bounds (see [`Limits`])
//! - head (request line + headers) at most `head_max` bytes and
//!   [`MAX_HEADERS`] fields, else `431`;
//! - body (`Content-Length`) at most `body_max` bytes, else `413` at once,
//!   before reading any of it; no route reads a body, it is drained and
//!   dropped; `Transfer-Encoding` is refused with `411`;
//! - head and body within `read_timeout` of the accept, else `408`.

use std::time::Duration;

/// Most header fields a request may carry.
pub(crate) const MAX_HEADERS: usize = 32;

/// Every bound of the admin endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Threads that build answers (`/health`, `/metrics`, `/report`, `/dlq`).
    pub workers: usize,
    /// Connections open at once; more are closed at once.
    pub max_connections: usize,
    /// Largest request head, bytes.
    pub head_max: usize,
    /// Largest request body, bytes.
    pub body_max: usize,
    /// Time from accept to a complete request.
    pub read_timeout: Duration,
    /// Time to write an answer (and let the client close) before the
    /// connection is dropped.
    pub write_timeout: Duration,
    /// `POST /dlq/replay` requests waiting behind the one in progress; more
    /// get `503`.
    pub replay_queue: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            workers: 2,
            max_connections: 64,
            head_max: 8 * 1024,
            body_max: 64 * 1024,
            read_timeout: Duration::from_secs(5),
            write_timeout: Duration::from_secs(5),
            replay_queue: 1,
        }
    }
}

/// A request, as the routes see it (the body is never kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
    /// `GET`, `POST`, …
    pub method: String,
    /// The request target: path and query.
    pub target: String,
    /// The `Authorization` header's value, if any.
    pub authorization: Option<String>,
}

impl Request {
    /// The path, without the query.
    pub(crate) fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    /// The value of `key` in the query (`?key=value&…`), undecoded.
    pub(crate) fn query(&self, key: &str) -> Option<&str> {
        let q = self.target.split_once('?')?.1;
        q.split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    }
}

/// A complete request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Head {
    /// The request.
    pub request: Request,
    /// Bytes of the head, blank line included.
    pub head_len: usize,
    /// Bytes of body announced by `Content-Length` (0 without one).
    pub body_len: usize,
}

/// A request the endpoint refuses; each variant maps to one status code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RequestError {
    /// Send a shorter head (fewer or shorter headers, a shorter URL).
    #[error("request head over {max} bytes")]
    HeadTooLarge {
        /// The bound.
        max: usize,
    },
    /// Send fewer header fields.
    #[error("more than {MAX_HEADERS} header fields")]
    TooManyHeaders,
    /// No route takes a body this large.
    #[error("body of {len} bytes over the {max}-byte limit")]
    BodyTooLarge {
        /// Announced length.
        len: u64,
        /// The bound.
        max: usize,
    },
    /// Not an HTTP/1.x request.
    #[error("malformed request: {0}")]
    Malformed(&'static str),
    /// Only HTTP/1.0 and HTTP/1.1.
    #[error("only HTTP/1.0 and HTTP/1.1 are served")]
    Version,
    /// Chunked bodies are not taken: announce `Content-Length`.
    #[error("Transfer-Encoding is not accepted: send Content-Length")]
    LengthRequired,
    /// The client did not send a complete request in time.
    #[error("request not complete within {0:?}")]
    Timeout(Duration),
}

impl RequestError {
    /// The status code that answers it.
    pub(crate) fn status(&self) -> u16 {
        match self {
            RequestError::HeadTooLarge { .. } | RequestError::TooManyHeaders => 431,
            RequestError::BodyTooLarge { .. } => 413,
            RequestError::Malformed(_) => 400,
            RequestError::Version => 505,
            RequestError::LengthRequired => 411,
            RequestError::Timeout(_) => 408,
        }
    }

    /// The answer: its status and the error as one line of text.
    pub(crate) fn response(&self) -> Response {
        Response::text(self.status(), format!("{self}\n"))
    }
}

/// Parses the head at the start of `buf`: `Ok(None)` while it is incomplete
/// and still within bounds.
///
/// # Errors
/// When the head is over a bound or is not HTTP/1.x (see [`RequestError`]).
pub(crate) fn parse_head(buf: &[u8], limits: &Limits) -> Result<Option<Head>, RequestError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) if n <= limits.head_max => n,
        Ok(httparse::Status::Partial) if buf.len() < limits.head_max => return Ok(None),
        Ok(_) => {
            return Err(RequestError::HeadTooLarge {
                max: limits.head_max,
            })
        }
        Err(httparse::Error::TooManyHeaders) => return Err(RequestError::TooManyHeaders),
        Err(httparse::Error::Version) => return Err(RequestError::Version),
        Err(_) => return Err(RequestError::Malformed("not an HTTP/1.x request head")),
    };
    let mut body_len: Option<u64> = None;
    let mut authorization = None;
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(h.value)
                .ok()
                .map(str::trim)
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or(RequestError::Malformed("Content-Length is not a number"))?;
            if body_len.is_some_and(|b| b != v) {
                return Err(RequestError::Malformed(
                    "conflicting Content-Length headers",
                ));
            }
            body_len = Some(v);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(RequestError::LengthRequired);
        } else if h.name.eq_ignore_ascii_case("authorization") {
            authorization = std::str::from_utf8(h.value).ok().map(str::to_string);
        }
    }
    let body_len = body_len.unwrap_or(0);
    if body_len > limits.body_max as u64 {
        return Err(RequestError::BodyTooLarge {
            len: body_len,
            max: limits.body_max,
        });
    }
    let (Some(method), Some(target)) = (req.method, req.path) else {
        return Err(RequestError::Malformed("no request line"));
    };
    Ok(Some(Head {
        request: Request {
            method: method.to_string(),
            target: target.to_string(),
            authorization,
        },
        head_len,
        body_len: body_len as usize,
    }))
}

/// An answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Response {
    /// Status code.
    pub status: u16,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// One extra header, if any (`WWW-Authenticate`, `Retry-After`).
    pub header: Option<(&'static str, &'static str)>,
    /// The body.
    pub body: String,
}

impl Response {
    /// A `text/plain` answer.
    pub(crate) fn text(status: u16, body: impl Into<String>) -> Self {
        Response::with_type(status, "text/plain; charset=utf-8", body)
    }

    /// An answer of any content type.
    pub(crate) fn with_type(
        status: u16,
        content_type: &'static str,
        body: impl Into<String>,
    ) -> Self {
        Response {
            status,
            content_type,
            header: None,
            body: body.into(),
        }
    }

    /// The same answer with one extra header.
    pub(crate) fn and_header(mut self, name: &'static str, value: &'static str) -> Self {
        self.header = Some((name, value));
        self
    }

    /// The bytes on the wire.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.status,
            reason(self.status),
            self.content_type,
            self.body.len()
        );
        if let Some((k, v)) = self.header {
            out.push_str(&format!("{k}: {v}\r\n"));
        }
        out.push_str("\r\n");
        let mut bytes = out.into_bytes();
        bytes.extend_from_slice(self.body.as_bytes());
        bytes
    }
}

/// The reason phrase of a status code.
pub(crate) fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Option<Head>, RequestError> {
        parse_head(s.as_bytes(), &Limits::default())
    }

    #[test]
    fn a_complete_head_with_query_token_and_body_length() {
        let h = parse("POST /dlq/replay?id=o7&x=1 HTTP/1.1\r\nHost: a\r\nauthorization: Bearer t\r\nContent-Length: 3\r\n\r\nabc")
            .unwrap()
            .unwrap();
        assert_eq!(h.request.method, "POST");
        assert_eq!(h.request.path(), "/dlq/replay");
        assert_eq!(h.request.query("id"), Some("o7"));
        assert_eq!(h.request.query("nope"), None);
        assert_eq!(h.request.authorization.as_deref(), Some("Bearer t"));
        assert_eq!(h.body_len, 3);
        assert_eq!(h.head_len, "POST /dlq/replay?id=o7&x=1 HTTP/1.1\r\nHost: a\r\nauthorization: Bearer t\r\nContent-Length: 3\r\n\r\n".len());
    }

    #[test]
    fn partial_heads_wait_until_a_bound() {
        assert_eq!(parse("GET /hea"), Ok(None));
        assert_eq!(parse("GET /health HTTP/1.1\r\nHost: a\r\n"), Ok(None));
        let long = format!("GET /{} HTTP/1.1", "a".repeat(9_000));
        assert_eq!(
            parse(&long),
            Err(RequestError::HeadTooLarge { max: 8 * 1024 })
        );
        assert_eq!(parse(&long).unwrap_err().status(), 431);
    }

    #[test]
    fn refusals_and_their_status_codes() {
        let huge = parse("POST /dlq/replay HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n");
        assert_eq!(huge.clone().unwrap_err().status(), 413);
        let many: String = (0..40).map(|i| format!("X-{i}: y\r\n")).collect();
        assert_eq!(
            parse(&format!("GET / HTTP/1.1\r\n{many}\r\n")),
            Err(RequestError::TooManyHeaders)
        );
        for (req, status) in [
            ("GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
            (
                "GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                400,
            ),
            ("GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 411),
            ("GET / HTTP/2.0\r\n\r\n", 505),
            ("\x16\x03\x01 tls hello\r\n\r\n", 400),
        ] {
            assert_eq!(parse(req).unwrap_err().status(), status, "{req:?}");
        }
    }

    #[test]
    fn responses_close_and_carry_their_length() {
        let r = Response::text(401, "no\n").and_header("WWW-Authenticate", "Bearer");
        assert_eq!(
            String::from_utf8(r.encode()).unwrap(),
            "HTTP/1.1 401 Unauthorized\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 3\r\nConnection: close\r\nWWW-Authenticate: Bearer\r\n\r\nno\n"
        );
    }
}
