//! Status codes returned by compiled models (`int net_run(...)`) and the [`Error`] type the
//! safe bindings turn a non-zero code into. It does not decide when a model fails; the
//! generated code does.

use core::fmt;

/// A status code returned by a compiled model's entry point (`0` is success).
///
/// The numeric values are ABI: the back end emits them and the C header documents them.
/// New codes may be appended; existing ones never change value.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// Success.
    Ok = 0,
    /// An input, output or workspace pointer was null.
    NullPointer = 1,
    /// The workspace (or a tensor) was not aligned as the model requires.
    Misaligned = 2,
    /// A tensor's shape does not match what the model expects.
    ShapeMismatch = 3,
    /// A tensor's element type does not match what the model expects.
    DTypeMismatch = 4,
    /// A data-dependent index (gather, one-hot, ...) was out of range at run time.
    IndexOutOfRange = 5,
    /// The model needs something this build or this CPU does not support.
    Unsupported = 6,
    /// An internal invariant was violated (a bug in nnefc; please report it).
    Internal = 7,
    /// An external weights blob is not an nnefc weights file, is of another format
    /// version, is truncated, or its data does not match the checksum in its header.
    InvalidWeights = 8,
    /// An external weights blob is valid but was written for another model.
    WrongWeights = 9,
}

impl Status {
    /// Every status, in code order.
    pub const ALL: [Status; 10] = [
        Status::Ok,
        Status::NullPointer,
        Status::Misaligned,
        Status::ShapeMismatch,
        Status::DTypeMismatch,
        Status::IndexOutOfRange,
        Status::Unsupported,
        Status::Internal,
        Status::InvalidWeights,
        Status::WrongWeights,
    ];

    /// The status with numeric value `code`, or `None` for an unknown code.
    pub fn from_code(code: i32) -> Option<Status> {
        Status::ALL.iter().copied().find(|s| s.code() == code)
    }

    /// The numeric value of this status.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// A short human-readable description.
    pub fn message(self) -> &'static str {
        match self {
            Status::Ok => "success",
            Status::NullPointer => "a null pointer was passed",
            Status::Misaligned => "a buffer is not aligned as required",
            Status::ShapeMismatch => "a tensor's shape does not match the model",
            Status::DTypeMismatch => "a tensor's element type does not match the model",
            Status::IndexOutOfRange => "an index computed at run time is out of range",
            Status::Unsupported => "not supported by this build or CPU",
            Status::Internal => "internal error in nnefc-generated code",
            Status::InvalidWeights => {
                "the weights are not a valid nnefc weights file (bad header, truncated or corrupted)"
            }
            Status::WrongWeights => "the weights file was written for another model",
        }
    }
}

/// A failure reported by a compiled model or by the safe wrappers of this crate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Error {
    /// A known non-zero [`Status`].
    Status(Status),
    /// A non-zero code this version of the runtime does not know.
    Unknown(i32),
}

impl Error {
    /// The numeric status code this error corresponds to.
    pub fn code(self) -> i32 {
        match self {
            Error::Status(s) => s.code(),
            Error::Unknown(c) => c,
        }
    }
}

impl From<Status> for Error {
    fn from(s: Status) -> Error {
        Error::Status(s)
    }
}

/// Turns a status code returned by a compiled model into a `Result`: `0` is `Ok(())`.
pub fn check(code: i32) -> Result<(), Error> {
    match Status::from_code(code) {
        Some(Status::Ok) => Ok(()),
        Some(s) => Err(Error::Status(s)),
        None => Err(Error::Unknown(code)),
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Status(s) => write!(f, "{} (status {})", s.message(), s.code()),
            Error::Unknown(c) => write!(f, "unknown status code {c}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for s in Status::ALL {
            assert_eq!(Status::from_code(s.code()), Some(s));
        }
        assert_eq!(Status::from_code(10), None);
        assert_eq!(Status::from_code(-1), None);
    }

    #[test]
    fn check_maps_codes() {
        assert_eq!(check(0), Ok(()));
        assert_eq!(check(2), Err(Error::Status(Status::Misaligned)));
        assert_eq!(check(99), Err(Error::Unknown(99)));
        assert_eq!(Error::Unknown(99).code(), 99);
    }

    #[cfg(feature = "std")]
    #[test]
    fn display() {
        assert_eq!(
            Error::Status(Status::ShapeMismatch).to_string(),
            "a tensor's shape does not match the model (status 3)"
        );
        assert_eq!(Error::Unknown(42).to_string(), "unknown status code 42");
    }
}
