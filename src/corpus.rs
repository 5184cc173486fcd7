//! Where the test and benchmark models are: the models shipped in `examples/models` and the
//! shared corpus (`../shared/models` next to the repository), each a folder with
//! `model.nnef/`, `input.dat`, `expected.dat` (and `model.onnx` for comparisons).
//!
//! Used by the integration tests, `cargo bench` and the `compare` example. It only finds
//! folders; it reads no model.

use std::path::{Path, PathBuf};

/// One model folder of the corpus.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelDir {
    /// The folder's name (`tiny_cnn`).
    pub name: String,
    /// The folder.
    pub dir: PathBuf,
}

impl ModelDir {
    /// The NNEF model folder.
    pub fn nnef(&self) -> PathBuf {
        self.dir.join("model.nnef")
    }
    /// The input tensor.
    pub fn input(&self) -> PathBuf {
        self.dir.join("input.dat")
    }
    /// The reference output.
    pub fn expected(&self) -> PathBuf {
        self.dir.join("expected.dat")
    }
    /// The same model as ONNX.
    pub fn onnx(&self) -> PathBuf {
        self.dir.join("model.onnx")
    }
}

/// The models shipped in the repository (`<repo>/examples/models`).
pub fn shipped(repo: &Path) -> Vec<ModelDir> {
    models_in(&repo.join("examples/models"))
}

/// The shared corpus: `$NNEFC_SHARED_MODELS` if set, else the first of
/// `<repo>/../shared/models` and `<repo>/../../shared/models` (a git worktree one level
/// deeper) that exists.
pub fn shared_dir(repo: &Path) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("NNEFC_SHARED_MODELS") {
        let p = PathBuf::from(p);
        return p.is_dir().then_some(p);
    }
    ["../shared/models", "../../shared/models"]
        .iter()
        .map(|r| repo.join(r))
        .find(|p| p.is_dir())
}

/// Model folders (with `model.nnef/` and `input.dat`) directly under `dir`, sorted by name.
pub fn models_in(dir: &Path) -> Vec<ModelDir> {
    let mut v: Vec<ModelDir> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.join("model.nnef").exists() && p.join("input.dat").is_file())
        .map(|dir| ModelDir {
            name: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            dir,
        })
        .collect();
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}
