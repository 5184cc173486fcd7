//! The single integration-test binary of nnefc (one link step for every suite).

mod khronos;
mod tidy;
