//! # agentwatch-http: the HTTP plumbing of the adapters
//!
//! The one place for what every HTTP adapter of agentwatch (channels, LLM, opencode) needs:
//!
//! - [`Client`]: a ureq agent with a connect timeout and a whole-request timeout
//!   ([`Settings`]), non-2xx answers read as answers (not transport errors), redirects followed
//!   only when asked for. [`Client::post_json`] and [`Client::get`] read a 2xx answer's body up to
//!   a size limit and map every failure to one [`HttpError`]: unreachable, timed out, or a
//!   non-2xx status with the head of its body. [`Client::get_body`] hands a 2xx answer's body
//!   over as a reader (bounded, timed), for a parser that reads as it arrives. [`Client::stream`] reads a body as it arrives
//!   (server-sent events) with a limit on each read instead of on the whole request.
//! - [`Target`]: a request URL with the form errors show (user-info dropped, a query shown as
//!   `?<redacted>`, see [`url_parts`]) and the secrets scrubbed from every text an error keeps
//!   ([`scrub`]). An [`HttpError`]'s `Display` names the shown URL and never a secret.
//! - [`Redacted`], the `Debug` stand-in for a secret field.
//! - [`basic_auth`], the Basic-auth header value, and [`percent_encode`] (and [`percent_decode`]) for path segments and
//!   query values.
//!
//! Adapters keep their own error enums and map an [`HttpError`] into them;
//! [`impl_from_http_error!`] writes that mapping for an enum with the usual `Unreachable`,
//! `Timeout` and `Status` variants.
//!
//! ```no_run
//! use agentwatch_http::{Client, Settings, Target};
//! use std::time::Duration;
//!
//! let target = Target::new("https://hooks.example.com/x?token=s3cret").with_secret("s3cret");
//! let client = Client::new(Settings::new(Duration::from_secs(10)));
//! match client.post_json(&target, &[], r#"{"text":"hi"}"#) {
//!     Ok(answer) => println!("{}", answer.body),
//!     // `https://hooks.example.com/x?<redacted>: HTTP 500: …`
//!     Err(e) => eprintln!("{e}"),
//! }
//! ```
#![forbid(unsafe_code)]

mod client;
mod encode;
mod redact;

pub use client::{
    Answer, Body, Client, DEFAULT_MAX_BODY_BYTES, ERROR_BODY_READ_BYTES, Failure, HttpError,
    Settings, Stream,
};
pub use encode::{basic_auth, percent_decode, percent_encode};
pub use redact::{Redacted, Target, UrlParts, head, redact_text, scrub, shown_url, url_parts};

/// Implements `From<`[`HttpError`]`>` for an error enum that has the variants
/// `Unreachable { url, message }`, `Timeout { url, timeout, message }` and
/// `Status { url, status, body }` (`url`, `message`, `body`: `String`; `timeout`: `Duration`;
/// `status`: `u16`), each [`Failure`] going to the variant of its name.
///
/// ```
/// use std::time::Duration;
///
/// #[derive(Debug)]
/// enum MyError {
///     Unreachable { url: String, message: String },
///     Timeout { url: String, timeout: Duration, message: String },
///     Status { url: String, status: u16, body: String },
/// }
/// agentwatch_http::impl_from_http_error!(MyError);
///
/// let error = agentwatch_http::HttpError {
///     url: "http://h/x".into(),
///     failure: agentwatch_http::Failure::Status { status: 500, body: "boom".into() },
/// };
/// assert!(matches!(MyError::from(error), MyError::Status { status: 500, .. }));
/// ```
#[macro_export]
macro_rules! impl_from_http_error {
    ($error:ty) => {
        impl ::core::convert::From<$crate::HttpError> for $error {
            fn from(error: $crate::HttpError) -> Self {
                let $crate::HttpError { url, failure } = error;
                match failure {
                    $crate::Failure::Unreachable { message } => Self::Unreachable { url, message },
                    $crate::Failure::Timeout { timeout, message } => Self::Timeout {
                        url,
                        timeout,
                        message,
                    },
                    $crate::Failure::Status { status, body } => Self::Status { url, status, body },
                }
            }
        }
    };
}
