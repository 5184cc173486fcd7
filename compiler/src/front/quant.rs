//! (in progress) quant
