//! `GET /openapi.json`: the OpenAPI 3.1 document of this API, kept in the repository (`exec-server/openapi.json`)
//! and compiled in, so the server always describes itself as built. Behind the token like every path but
//! `/health`: the document is no secret, but the API's rule is that a caller without the token learns nothing
//! about it (see the auth decision in docs/exec-server.md). `bench/schemathesis.sh` proves server and document
//! agree.

use axum::http::header;
use axum::response::IntoResponse;

/// The document, as served.
pub const DOCUMENT: &str = include_str!("../../../openapi.json");

pub async fn document() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], DOCUMENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_is_json_of_this_version_and_lists_every_route() {
        let doc: serde_json::Value = serde_json::from_str(DOCUMENT).expect("openapi.json is valid JSON");
        assert_eq!(doc["openapi"], "3.1.0");
        assert_eq!(doc["info"]["version"], env!("CARGO_PKG_VERSION"), "bump openapi.json's info.version");
        let paths: Vec<&str> = doc["paths"].as_object().unwrap().keys().map(String::as_str).collect();
        for route in super::super::ENDPOINTS.split(", ") {
            let (method, path) = route.split_once(' ').unwrap();
            let operation = &doc["paths"][path][method.to_ascii_lowercase()];
            assert!(operation.is_object(), "{route} is not in openapi.json (it has {paths:?})");
        }
        let mut routes: Vec<&str> = super::super::ENDPOINTS
            .split(", ")
            .filter_map(|route| route.split_once(' '))
            .map(|(_, path)| path)
            .collect();
        routes.dedup();
        routes.sort_unstable();
        routes.dedup();
        assert_eq!(paths.len(), routes.len(), "openapi.json has more paths");
    }
}
