//! Compiles the shipped `tiny_cnn` model into this crate with `nnefc::Build`: a static
//! library linked into the binary and the typed module `tiny_cnn.rs` that `src/main.rs`
//! includes. Nothing else happens here.

fn main() {
    nnefc::Build::new()
        .model("../models/tiny_cnn/model.nnef")
        .prefix("tiny_cnn")
        .compile();
}
