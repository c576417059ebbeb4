//! The proxy's minimal HTTP/1.1 on raw sockets: keep-alive requests with
//! `Content-Length` or chunked bodies in, complete responses out.

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Largest accepted request head (request line plus headers).
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// Largest accepted request body.
const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// One parsed HTTP request.
pub(super) struct Request {
    pub(super) method: String,
    pub(super) content_type: Option<String>,
    pub(super) body: Vec<u8>,
    pub(super) close: bool,
}

/// Reads one request; `Ok(None)` when the client closed the connection
/// cleanly before starting another.
pub(super) async fn read_request(
    conn: &mut BufReader<TcpStream>,
) -> std::io::Result<Option<Request>> {
    let mut head_bytes = 0usize;
    let Some(request_line) = read_line(conn, &mut head_bytes).await? else {
        return Ok(None);
    };
    let mut parts = request_line.split_whitespace();
    let (Some(method), Some(_target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(invalid(format!("bad request line {request_line:?}")));
    };
    let method = method.to_owned();
    let mut close = version.eq_ignore_ascii_case("HTTP/1.0");
    let mut content_length: Option<usize> = None;
    let mut chunked = false;
    let mut content_type = None;
    loop {
        let line = read_line(conn, &mut head_bytes)
            .await?
            .ok_or_else(|| invalid("connection closed inside the request head".to_owned()))?;
        if line.is_empty() {
            break;
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(invalid(format!("bad header line {line:?}")));
        };
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => {
                let length = value
                    .parse()
                    .map_err(|_| invalid(format!("bad content-length {value:?}")))?;
                content_length = Some(length);
            }
            "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
            "content-type" => content_type = Some(value.to_owned()),
            "connection" => {
                let value = value.to_ascii_lowercase();
                if value.contains("close") {
                    close = true;
                } else if value.contains("keep-alive") {
                    close = false;
                }
            }
            "expect" if value.eq_ignore_ascii_case("100-continue") => {
                conn.get_mut()
                    .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                    .await?;
            }
            _ => {}
        }
    }
    let body = if chunked {
        read_chunked(conn, &mut head_bytes).await?
    } else {
        let length = content_length.unwrap_or(0);
        if length > MAX_BODY_BYTES {
            return Err(invalid(format!("body of {length} bytes is too large")));
        }
        let mut body = vec![0; length];
        conn.read_exact(&mut body).await?;
        body
    };
    Ok(Some(Request {
        method,
        content_type,
        body,
        close,
    }))
}

/// Reads a chunked body (and discards its trailers).
async fn read_chunked(
    conn: &mut BufReader<TcpStream>,
    head_bytes: &mut usize,
) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line = read_line(conn, head_bytes)
            .await?
            .ok_or_else(|| invalid("connection closed inside a chunked body".to_owned()))?;
        let size_hex = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_hex, 16)
            .map_err(|_| invalid(format!("bad chunk size {line:?}")))?;
        if size == 0 {
            // Trailers, up to the empty line.
            while let Some(trailer) = read_line(conn, head_bytes).await? {
                if trailer.is_empty() {
                    return Ok(body);
                }
            }
            return Err(invalid(
                "connection closed inside chunk trailers".to_owned(),
            ));
        }
        if body.len() + size > MAX_BODY_BYTES {
            return Err(invalid("chunked body too large".to_owned()));
        }
        let start = body.len();
        body.resize(start + size, 0);
        conn.read_exact(&mut body[start..]).await?;
        let mut crlf = [0u8; 2];
        conn.read_exact(&mut crlf).await?;
        if &crlf != b"\r\n" {
            return Err(invalid("chunk not followed by CRLF".to_owned()));
        }
    }
}

/// Reads one CRLF- (or LF-) terminated line without its terminator;
/// `Ok(None)` at EOF before any byte.
async fn read_line(
    conn: &mut BufReader<TcpStream>,
    head_bytes: &mut usize,
) -> std::io::Result<Option<String>> {
    let mut line = Vec::new();
    let read = (&mut *conn)
        .take((MAX_HEAD_BYTES.saturating_sub(*head_bytes) + 1) as u64)
        .read_until(b'\n', &mut line)
        .await?;
    if read == 0 {
        return Ok(None);
    }
    *head_bytes += read;
    if *head_bytes > MAX_HEAD_BYTES {
        return Err(invalid("request head too large".to_owned()));
    }
    if line.last() != Some(&b'\n') {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "connection closed mid-line",
        ));
    }
    line.pop();
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    String::from_utf8(line)
        .map(Some)
        .map_err(|_| invalid("non-UTF-8 request head".to_owned()))
}

/// An `InvalidData` error: the client spoke broken HTTP.
fn invalid(message: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, message)
}

/// Writes a complete response; `false` if the connection broke.
pub(super) async fn write_response(
    conn: &mut BufReader<TcpStream>,
    status: u16,
    content_type: Option<&str>,
    body: &[u8],
    close: bool,
) -> bool {
    let reason = reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Unknown");
    let mut response = format!("HTTP/1.1 {status} {reason}\r\n");
    if let Some(content_type) = content_type {
        response.push_str(&format!("content-type: {content_type}\r\n"));
    }
    response.push_str(&format!("content-length: {}\r\n", body.len()));
    if close {
        response.push_str("connection: close\r\n");
    }
    response.push_str("\r\n");
    let mut bytes = response.into_bytes();
    bytes.extend_from_slice(body);
    let stream = conn.get_mut();
    stream.write_all(&bytes).await.is_ok() && stream.flush().await.is_ok()
}
