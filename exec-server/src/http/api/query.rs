//! The query strings the `/runs` endpoints take: `name=value` pairs of byte offsets and booleans, percent-decoded
//! (as the path's run id is, so `?stdout=%31%30` is offset 10, as a client's URL library may write it), the last
//! of a repeated name winning.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use super::AppError;

/// A request's query, as decoded pairs.
pub struct Query(Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for Query {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, AppError> {
        let axum::extract::Query(pairs) =
            axum::extract::Query::<Vec<(String, String)>>::from_request_parts(parts, state).await.map_err(|err| {
                AppError::bad_request(format!(
                    "the query string cannot be read ({}): give name=value pairs",
                    err.body_text()
                ))
            })?;
        Ok(Query(pairs))
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
