//! Every error the API returns: `{"error": {"code": "...", "message": "..."}}` with a 4xx status for what
//! the caller can change, 503 when the store failed, and 500 only for a fault of the service itself (never
//! with a stack trace).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use permits_runtime::{Refusal, RuntimeError};
use serde_json::json;

/// An error answer: its status, a stable code (snake case) and a message a person reads.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) code: String,
    pub(crate) message: String,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: &str, message: impl Into<String>) -> ApiError {
        ApiError { status, code: code.to_string(), message: message.into() }
    }

    pub(crate) fn bad_request(code: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub(crate) fn forbidden(code: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::FORBIDDEN, code, message)
    }

    pub(crate) fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub(crate) fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
}

impl From<RuntimeError> for ApiError {
    fn from(e: RuntimeError) -> ApiError {
        let message = e.to_string();
        match e {
            RuntimeError::Refused { refusal, .. } => {
                ApiError { status: refusal_status(refusal), code: refusal.code(), message }
            }
            RuntimeError::UnknownProposal(_) => ApiError::new(StatusCode::NOT_FOUND, "unknown_proposal", message),
            RuntimeError::UnknownRule(_) => ApiError::new(StatusCode::NOT_FOUND, "unknown_rule", message),
            RuntimeError::UnknownBudget(_) => ApiError::new(StatusCode::NOT_FOUND, "unknown_budget", message),
            RuntimeError::UnknownExecution(_) => ApiError::new(StatusCode::NOT_FOUND, "unknown_execution", message),
            RuntimeError::UnknownTask(_) => ApiError::new(StatusCode::NOT_FOUND, "unknown_task", message),
            RuntimeError::Table(_) => ApiError::new(StatusCode::CONFLICT, "table", message),
            RuntimeError::Store(_) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "store", message),
        }
    }
}

/// The HTTP status of a refusal: 403 when the policy or who asks forbids it, 422 when the request lacks what
/// the runtime needs (a reason, a covered version), 400 for an input the operation does not take
/// (`invalid_request`, the code of a body that does not fit), 413 for one over a limit, 409 when the state of the proposal, grant, claim or
/// budget refuses it now.
fn refusal_status(refusal: Refusal) -> StatusCode {
    match refusal {
        Refusal::Never | Refusal::MustPropose | Refusal::NotDecider | Refusal::Authority | Refusal::Rule => {
            StatusCode::FORBIDDEN
        }
        Refusal::ReasonRequired | Refusal::UnknownVersion => StatusCode::UNPROCESSABLE_ENTITY,
        Refusal::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        Refusal::InvalidRequest => StatusCode::BAD_REQUEST,
        _ => StatusCode::CONFLICT,
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {"code": self.code, "message": self.message}});
        (self.status, axum::Json(body)).into_response()
    }
}
