//! This start of the server, named: a random boot id made when the API is set up, sent in every reply's
//! [`protocol::BOOT_ID_HEADER`] (but a 401's and `/health`'s) and in `/info`. Runs do not survive a restart, so a client that reconnects and
//! finds its run unknown tells from the id whether the server restarted under it (the run died with the previous
//! start) or the same server let the run go (its reattach window passed, or it forgot an ended run).

use axum::extract::{Request, State};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;

use super::AppState;

/// A fresh boot id: 32 hex digits from /dev/urandom, or, where that cannot be read, the pid and the start time in
/// nanoseconds (unique per start on one machine, which is all a client compares).
pub fn new_boot_id() -> String {
    match protocol::random_hex(16) {
        Ok(id) => id,
        Err(_) => {
            let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            format!("{:08x}{:024x}", std::process::id(), since.as_nanos())
        }
    }
}

/// Adds the boot id to every reply given to a caller the token check let through, but those of the paths open
/// without the token (`/health`, and `/metrics` with `--metrics-open`: [`super::auth::open_without_token`]): the
/// token's rule is that a caller without it learns nothing of the server.
pub async fn stamp(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let open = super::auth::open_without_token(&state, request.uri().path());
    let mut response = next.run(request).await;
    if open {
        return response;
    }
    if let Ok(value) = HeaderValue::from_str(&state.boot_id) {
        response.headers_mut().insert(protocol::BOOT_ID_HEADER, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_ids_are_32_hex_digits_and_differ() {
        let (a, b) = (new_boot_id(), new_boot_id());
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|byte| byte.is_ascii_hexdigit()));
        assert_ne!(a, b);
        assert!(protocol::BOOT_ID_HEADER.len() < 16);
    }
}
