//! [`Build`]: compiling NNEF models from a Cargo build script, in the style of `cc::Build`.
//!
//! ```no_run
//! // In build.rs (`fn main`) of a crate that depends on `nnefc-runtime` and
//! // build-depends on `nnefc`:
//! nnefc::Build::new().model("models/net").prefix("net").compile();
//! ```
//!
//! ```ignore
//! // src/main.rs
//! include!(concat!(env!("OUT_DIR"), "/net.rs"));
//! let mut model = net::Model::new();
//! let probs = model.infer(&input)?; // an nnefc_runtime::Tensor<f32>
//! ```
//!
//! `compile` writes into `OUT_DIR`: the object, a static library `lib<prefix>.a` holding it,
//! the C header `<prefix>.h` and the Rust module `<prefix>.rs`. It prints the directives that
//! make Cargo link the library and rerun the script when a model file changes. It does not
//! build `nnefc-runtime`: the crate lists it as an ordinary dependency.

use crate::archive;
use nnefc_compiler::back::{Artifacts, ModelInterface};
use nnefc_compiler::session::{self, Options};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// A model compilation configured for a build script.
#[derive(Clone, Debug)]
pub struct Build {
    model: Option<PathBuf>,
    prefix: Option<String>,
    input_shapes: BTreeMap<String, Vec<Option<usize>>>,
    optimize: bool,
    target: Option<String>,
    out_dir: Option<PathBuf>,
    cargo_metadata: bool,
    profile: bool,
    external_weights: bool,
}

impl Default for Build {
    fn default() -> Self {
        Build::new()
    }
}

/// What [`Build::try_compile`] wrote.
#[derive(Clone, Debug)]
pub struct BuildOutput {
    /// The static library `lib<prefix>.a`.
    pub library: PathBuf,
    /// The relocatable object inside it, also kept as `<prefix>.o`.
    pub object: PathBuf,
    /// The C header `<prefix>.h`.
    pub header: PathBuf,
    /// The Rust module `<prefix>.rs` to `include!`.
    pub rust: PathBuf,
    /// The weights file `<prefix>.weights`, with [`Build::external_weights`].
    pub weights: Option<PathBuf>,
    /// Names, dtypes and shapes of the inputs and outputs.
    pub interface: ModelInterface,
}

/// Why [`Build::try_compile`] failed.
#[derive(Debug)]
pub enum BuildError {
    /// No model path was given.
    NoModel,
    /// Neither [`Build::out_dir`] nor the `OUT_DIR` variable gives an output directory.
    NoOutDir,
    /// The model could not be compiled; the text is the rendered diagnostic.
    Compile(String),
    /// The static library could not be written.
    Archive(archive::ArchiveError),
    /// Writing an output failed.
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::NoModel => f.write_str("nnefc::Build: no model given (call .model(path))"),
            BuildError::NoOutDir => f.write_str(
                "nnefc::Build: OUT_DIR is not set (not run by Cargo?) and no .out_dir(...) given",
            ),
            BuildError::Compile(m) => f.write_str(m.trim_end()),
            BuildError::Archive(e) => write!(f, "nnefc::Build: {e}"),
            BuildError::Io { path, source } => {
                write!(f, "nnefc::Build: {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for BuildError {}

pub use nnefc_compiler::session::c_identifier;

/// Compiles a model with `prefix`, or the graph's name as a C identifier when `None`
/// (`session::compile_with_prefix`: the one pipeline every entry point uses).
pub fn compile_model(
    path: &Path,
    opts: &Options,
    prefix: Option<&str>,
) -> Result<session::Compiled, session::Error> {
    session::compile_with_prefix(path, opts, prefix)
}

/// Every file a model is read from, for `cargo:rerun-if-changed`.
fn model_files(path: &Path) -> Vec<PathBuf> {
    let mut files = vec![path.to_path_buf()];
    if let Ok(entries) = std::fs::read_dir(path) {
        let mut more: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.is_file())
            .collect();
        more.sort();
        files.extend(more);
    }
    files
}

impl Build {
    /// A build with no model, the optimizing pipeline and the target Cargo builds for.
    pub fn new() -> Build {
        Build {
            model: None,
            prefix: None,
            input_shapes: BTreeMap::new(),
            optimize: true,
            target: None,
            out_dir: None,
            cargo_metadata: true,
            profile: false,
            external_weights: false,
        }
    }

    /// The model: a folder with `graph.nnef` and `.dat` files, a `.tgz`/`.tar` of one, or a
    /// bare `graph.nnef`. Relative paths are relative to the crate (Cargo runs build
    /// scripts there).
    pub fn model(&mut self, path: impl AsRef<Path>) -> &mut Build {
        self.model = Some(path.as_ref().to_path_buf());
        self
    }

    /// The prefix of the symbols (`<prefix>_run`), of the C macros and the name of the Rust
    /// module and library. Default: the graph's name.
    pub fn prefix(&mut self, prefix: &str) -> &mut Build {
        self.prefix = Some(prefix.to_string());
        self
    }

    /// Fixes the shape of graph input `name` (needed when the model leaves an extent open).
    pub fn input_shape(&mut self, name: &str, dims: &[usize]) -> &mut Build {
        self.input_shapes
            .insert(name.to_string(), dims.iter().map(|&d| Some(d)).collect());
        self
    }

    /// Sets the shape of graph input `name` with extents left open: `None` as the leading
    /// extent makes the batch a run-time argument (`&[None, Some(3), Some(224),
    /// Some(224)]`; the generated `Model` then takes any number of samples, see the
    /// README's "Run-time batch"); other extents must be known to generate code.
    pub fn input_dims(&mut self, name: &str, dims: &[Option<usize>]) -> &mut Build {
        self.input_shapes.insert(name.to_string(), dims.to_vec());
        self
    }

    /// Runs the graph optimizations (default `true`; `false` is `-O0`).
    pub fn optimize(&mut self, on: bool) -> &mut Build {
        self.optimize = on;
        self
    }

    /// The target triple. Default: Cargo's `TARGET` when it differs from `HOST`, else the
    /// host with the CPU features of the machine that builds.
    pub fn target(&mut self, triple: &str) -> &mut Build {
        self.target = Some(triple.to_string());
        self
    }

    /// Also export `PREFIX_run_profiled` and `PREFIX_profile_table` (a hook after every
    /// step; see the README's "Threads and profiling"). Default `false`.
    pub fn profile(&mut self, on: bool) -> &mut Build {
        self.profile = on;
        self
    }

    /// Keep the weights out of the object: they go to `<prefix>.weights` in the output
    /// folder, which the program loads (`nnefc_runtime::Weights::from_file`) and gives
    /// the model (`Model::with_weights`). Default `false` (weights embedded).
    pub fn external_weights(&mut self, on: bool) -> &mut Build {
        self.external_weights = on;
        self
    }

    /// Where to write the outputs. Default: `OUT_DIR`.
    pub fn out_dir(&mut self, dir: impl AsRef<Path>) -> &mut Build {
        self.out_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Whether to print `cargo:` directives (default `true`).
    pub fn cargo_metadata(&mut self, on: bool) -> &mut Build {
        self.cargo_metadata = on;
        self
    }

    fn options(&self) -> Options {
        let mut opts = Options::default();
        opts.front.input_shapes = self.input_shapes.clone();
        opts.optimize = self.optimize;
        opts.back.profile = self.profile;
        opts.back.external_weights = self.external_weights;
        opts.back.target = self.target.clone().or_else(|| {
            let target = std::env::var("TARGET").ok()?;
            let host = std::env::var("HOST").ok()?;
            (target != host).then_some(target)
        });
        opts
    }

    /// Compiles the model and writes the library, header and Rust module; on failure
    /// prints the error (with the model's diagnostics) and exits the build script with
    /// status 1, which makes Cargo show it.
    pub fn compile(&self) -> BuildOutput {
        match self.try_compile() {
            Ok(out) => out,
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        }
    }

    /// Like [`compile`](Build::compile) but returns errors.
    pub fn try_compile(&self) -> Result<BuildOutput, BuildError> {
        let model = self.model.as_ref().ok_or(BuildError::NoModel)?;
        let out_dir = match &self.out_dir {
            Some(d) => d.clone(),
            None => PathBuf::from(std::env::var_os("OUT_DIR").ok_or(BuildError::NoOutDir)?),
        };
        if self.cargo_metadata {
            // Printed before compiling so a failing model is retried when it is fixed.
            for f in model_files(model) {
                println!("cargo:rerun-if-changed={}", f.display());
            }
        }
        let compiled =
            compile_model(model, &self.options(), self.prefix.as_deref()).map_err(|e| {
                BuildError::Compile(format!(
                    "nnefc::Build: cannot compile {}:\n{}",
                    model.display(),
                    e.render()
                ))
            })?;
        if self.cargo_metadata && !compiled.warnings.is_empty() {
            for line in compiled
                .render_warnings()
                .lines()
                .filter(|l| !l.trim().is_empty())
            {
                println!("cargo:warning={line}");
            }
        }
        write_outputs(&out_dir, &compiled.artifacts, self.cargo_metadata)
    }
}

fn write_outputs(
    out_dir: &Path,
    art: &Artifacts,
    cargo_metadata: bool,
) -> Result<BuildOutput, BuildError> {
    let prefix = &art.interface.prefix;
    std::fs::create_dir_all(out_dir).map_err(|source| BuildError::Io {
        path: out_dir.to_path_buf(),
        source,
    })?;
    let write = |name: String, bytes: &[u8]| -> Result<PathBuf, BuildError> {
        let path = out_dir.join(name);
        std::fs::write(&path, bytes).map_err(|source| BuildError::Io {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    };
    let object = write(format!("{prefix}.o"), &art.object)?;
    // Inside the archive the member name must fit 15 bytes; the prefix may not.
    let ar = archive::write(&[("model.o", &art.object)]).map_err(BuildError::Archive)?;
    let library = write(format!("lib{prefix}.a"), &ar)?;
    let header = write(format!("{prefix}.h"), art.header.as_bytes())?;
    let rust = write(format!("{prefix}.rs"), art.rust.as_bytes())?;
    let weights = match &art.weights {
        Some(w) => Some(write(format!("{prefix}.weights"), w)?),
        None => None,
    };
    if cargo_metadata {
        println!("cargo:rustc-link-search=native={}", out_dir.display());
        println!("cargo:rustc-link-lib=static={prefix}");
    }
    Ok(BuildOutput {
        library,
        object,
        header,
        rust,
        weights,
        interface: art.interface.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers() {
        assert_eq!(c_identifier("tiny-cnn"), "tiny_cnn");
        assert_eq!(c_identifier("3net"), "_3net");
        assert_eq!(c_identifier(""), "model");
    }

    #[test]
    fn errors_without_model_or_out_dir() {
        assert!(matches!(
            Build::new().out_dir("/tmp").try_compile(),
            Err(BuildError::NoModel)
        ));
        let e = Build::new()
            .model("/nonexistent/model.nnef")
            .out_dir("/tmp")
            .cargo_metadata(false)
            .try_compile();
        match e {
            Err(BuildError::Compile(m)) => assert!(m.contains("/nonexistent/model.nnef"), "{m}"),
            other => panic!("expected a compile error, got {other:?}"),
        }
    }

    /// `input_dims` with an open leading extent gives a run-time batch, and
    /// `external_weights` writes `<prefix>.weights` next to the library.
    #[test]
    fn run_time_batch_and_external_weights() {
        let out = std::env::temp_dir().join(format!("nnefc-build-test-{}", std::process::id()));
        let model = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/models/tiny_cnn/model.nnef"
        );
        let built = Build::new()
            .model(model)
            .prefix("tc")
            .input_dims("input", &[None, Some(1), Some(28), Some(28)])
            .external_weights(true)
            .out_dir(&out)
            .cargo_metadata(false)
            .try_compile()
            .expect("compiles");
        assert!(built.interface.inputs[0].batched && built.interface.outputs[0].batched);
        assert_eq!(built.interface.inputs[0].shape, [1, 1, 28, 28]);
        let weights = built.weights.expect("a weights file");
        assert_eq!(weights, out.join("tc.weights"));
        let bytes = std::fs::read(&weights).expect("written");
        assert_eq!(Some(bytes.len()), built.interface.weights.map(|w| w.size));
        let header = std::fs::read_to_string(&built.header).expect("header");
        assert!(header.contains("#define TC_RUNTIME_BATCH 1"), "{header}");
        assert!(header.contains("#define TC_WEIGHTS_EXTERNAL 1"), "{header}");
        let _ = std::fs::remove_dir_all(&out);
    }
}
