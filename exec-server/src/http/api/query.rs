//! The query strings the `/runs` endpoints take: plain `name=value` pairs of byte offsets and booleans. No decoding
//! is needed (a value that is not a plain number or `true`/`false` is refused by the parse), and the last of a
//! repeated name wins.

use std::convert::Infallible;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use super::AppError;

/// A request's query, as pairs.
pub struct Query(Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for Query {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Infallible> {
        let pairs = parts.uri.query().unwrap_or("").split('&').filter_map(|pair| pair.split_once('='));
        Ok(Query(pairs.map(|(name, value)| (name.to_owned(), value.to_owned())).collect()))
    }
}

impl Query {
    fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().rev().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }

    /// The byte offset `name`, if given; a 400 naming it when it is not a whole number ≥ 0.
    pub fn offset(&self, name: &str) -> Result<Option<u64>, AppError> {
        self.get(name)
            .map(|text| {
                text.parse().map_err(|_| {
                    AppError::bad_request(format!("{name}={text:?} is not a byte offset: give a whole number ≥ 0"))
                })
            })
            .transpose()
    }

    /// The boolean `name` (false when not given); a 400 naming it when it is neither `true` nor `false`.
    pub fn boolean(&self, name: &str) -> Result<bool, AppError> {
        match self.get(name) {
            None | Some("false") => Ok(false),
            Some("true") => Ok(true),
            Some(text) => Err(AppError::bad_request(format!("{name}={text:?} is not a boolean: give true or false"))),
        }
    }
}
