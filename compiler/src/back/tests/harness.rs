//! Differential test harness: graph → object → `cc -shared` with the runtime's static
//! library → `libloading` → run, and the tensor comparison used by every op test.
//!
//! The runtime static library is built once per test process into its own target
//! directory (`<target>/backend-tests`), so it never waits for the outer cargo's lock.

use crate::back::{Artifacts, BackendOptions, compile};
use crate::ir::{DType, Graph, Tensor, TensorData};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"),
    }
}

/// Path of `libnnefc_runtime.a`, built on first use. Release profile: the dev profile's
/// debug assertions turn on the standard library's UB checks inside the GEMM loops, which
/// made the runtime several times slower than what a user links (and timings misleading).
pub fn runtime_lib() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let dir = target_dir().join("backend-tests");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let st = Command::new(cargo)
            .args([
                "build",
                "-q",
                "--release",
                "-p",
                "nnefc-runtime",
                "--target-dir",
            ])
            .arg(&dir)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("run cargo to build the runtime");
        assert!(st.success(), "building nnefc-runtime failed");
        dir.join("release/libnnefc_runtime.a")
    })
}

pub fn scratch_dir() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let d = target_dir().join("backend-tests/tmp").join(format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&d).expect("create scratch dir");
    d
}

type ParRunFn = unsafe extern "C" fn(
    *const *const u8,
    *const *mut u8,
    *mut u8,
    *const nnefc_runtime::Parallel,
) -> i32;

/// A compiled and loaded model.
pub struct Loaded {
    pub art: Artifacts,
    _lib: libloading::Library,
    run: unsafe extern "C" fn(*const *const u8, *const *mut u8, *mut u8) -> i32,
    run_parallel: ParRunFn,
    dir: PathBuf,
}

/// Workers of the fake pool every differential run is repeated with.
const FAKE_WORKERS: usize = 3;

/// A `parallel_for` that runs the tasks on this thread in reverse order, task `i` as
/// worker `i % FAKE_WORKERS`: a task order and scratch assignment no serial run has, so a
/// task that depends on another's result or shares a worker's scratch shows up.
unsafe extern "C" fn reverse_for(
    _pool: *mut core::ffi::c_void,
    task: nnefc_runtime::TaskFn,
    ctx: *mut core::ffi::c_void,
    n: usize,
) {
    for i in (0..n).rev() {
        // SAFETY: the parallel_for contract, forwarded.
        unsafe { task(ctx, i, i % FAKE_WORKERS) };
    }
}

impl Drop for Loaded {
    fn drop(&mut self) {
        // `NNEFC_KEEP_SO=dir` keeps a copy of the library (symbols for `perf report`).
        if let Ok(keep) = std::env::var("NNEFC_KEEP_SO") {
            let to = std::path::Path::new(&keep).join(format!("{}.so", self.art.interface.prefix));
            let _ = std::fs::copy(self.dir.join("model.so"), to);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn opts(prefix: &str) -> BackendOptions {
    BackendOptions {
        prefix: prefix.into(),
        ..BackendOptions::default()
    }
}

/// Compiles, links and loads `g`.
pub fn load(g: &Graph, o: &BackendOptions) -> Loaded {
    let art = compile(g, o).unwrap_or_else(|e| panic!("compile failed: {e}"));
    let dir = scratch_dir();
    let obj = dir.join("model.o");
    let so = dir.join("model.so");
    std::fs::write(&obj, &art.object).expect("write object");
    let st = Command::new("cc")
        .arg("-shared")
        .arg(&obj)
        .arg(runtime_lib())
        .arg("-o")
        .arg(&so)
        .status()
        .expect("run cc");
    assert!(st.success(), "linking failed");
    // SAFETY: the library is our freshly compiled model; its entry point has the ABI below.
    unsafe {
        let lib = libloading::Library::new(&so).expect("load model");
        let sym: libloading::Symbol<
            '_,
            unsafe extern "C" fn(*const *const u8, *const *mut u8, *mut u8) -> i32,
        > = lib
            .get(format!("{}_run", o.prefix).as_bytes())
            .expect("entry symbol");
        let run = *sym;
        let psym: libloading::Symbol<'_, ParRunFn> = lib
            .get(format!("{}_run_parallel", o.prefix).as_bytes())
            .expect("parallel entry symbol");
        let run_parallel = *psym;
        Loaded {
            art,
            _lib: lib,
            run,
            run_parallel,
            dir,
        }
    }
}

#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Block([u8; 64]);

impl Loaded {
    /// Runs with fresh output buffers; returns the outputs or the status.
    ///
    /// Every run happens twice: through `PREFIX_run`, and through `PREFIX_run_parallel`
    /// with a fake pool of [`FAKE_WORKERS`] workers that runs tasks in reverse order;
    /// the two must agree bit for bit (outputs do not depend on the thread count).
    pub fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, i32> {
        let serial = self.run_once(inputs, None)?;
        let par = nnefc_runtime::Parallel {
            pool: std::ptr::null_mut(),
            workers: FAKE_WORKERS,
            parallel_for: Some(reverse_for),
        };
        let parallel = self.run_once(inputs, Some(&par))?;
        let bytes = |ts: &[Tensor]| ts.iter().map(|t| t.to_le_bytes()).collect::<Vec<_>>();
        assert!(
            bytes(&serial) == bytes(&parallel),
            "{}: outputs with {FAKE_WORKERS} workers differ from the serial run",
            self.art.interface.prefix
        );
        Ok(serial)
    }

    fn run_once(
        &self,
        inputs: &[Tensor],
        par: Option<&nnefc_runtime::Parallel>,
    ) -> Result<Vec<Tensor>, i32> {
        let in_bytes: Vec<Vec<u8>> = inputs.iter().map(|t| t.to_le_bytes()).collect();
        let mut out_bytes: Vec<Vec<u8>> = self
            .art
            .interface
            .outputs
            .iter()
            .map(|t| vec![0xA5u8; t.volume() * t.dtype.size()])
            .collect();
        // Poison the workspace so reads of unwritten scratch show up as garbage.
        let workers = par.map_or(1, |p| p.workers);
        let ws_len = self.art.interface.workspace_size_for(workers);
        let mut ws = vec![Block([0xCD; 64]); ws_len.div_ceil(64).max(1)];
        let ip: Vec<*const u8> = in_bytes.iter().map(|b| b.as_ptr()).collect();
        let op: Vec<*mut u8> = out_bytes.iter_mut().map(|b| b.as_mut_ptr()).collect();
        let wp = ws.as_mut_ptr() as *mut u8;
        // SAFETY: buffers sized from the interface; workspace 64-byte aligned and sized
        // for the workers; `par` is valid for the call.
        let status = unsafe {
            match par {
                None => (self.run)(ip.as_ptr(), op.as_ptr(), wp),
                Some(p) => (self.run_parallel)(ip.as_ptr(), op.as_ptr(), wp, p),
            }
        };
        if status != 0 {
            return Err(status);
        }
        Ok(self
            .art
            .interface
            .outputs
            .iter()
            .zip(&out_bytes)
            .map(|(t, b)| Tensor::from_le_bytes(t.dtype, t.shape.clone(), b).expect("output size"))
            .collect())
    }

    /// Median wall time of one call of the entry point over `iters` calls, with inputs,
    /// outputs and workspace allocated once (what a user's loop costs).
    pub fn time(&self, inputs: &[Tensor], iters: usize) -> std::time::Duration {
        let in_bytes: Vec<Vec<u8>> = inputs.iter().map(|t| t.to_le_bytes()).collect();
        let mut out_bytes: Vec<Vec<u8>> = self
            .art
            .interface
            .outputs
            .iter()
            .map(|t| vec![0u8; t.volume() * t.dtype.size()])
            .collect();
        let mut ws = vec![Block([0; 64]); self.art.workspace_size.div_ceil(64).max(1)];
        let ip: Vec<*const u8> = in_bytes.iter().map(|b| b.as_ptr()).collect();
        let op: Vec<*mut u8> = out_bytes.iter_mut().map(|b| b.as_mut_ptr()).collect();
        let mut times = Vec::with_capacity(iters);
        for _ in 0..iters.max(1) {
            let t = std::time::Instant::now();
            // SAFETY: buffers sized from the interface; workspace 64-byte aligned.
            let status =
                unsafe { (self.run)(ip.as_ptr(), op.as_ptr(), ws.as_mut_ptr() as *mut u8) };
            times.push(t.elapsed());
            assert_eq!(status, 0, "run failed");
        }
        times.sort();
        times[times.len() / 2]
    }

    /// A function symbol of the loaded object as a function pointer type `F`.
    ///
    /// # Safety
    /// `F` is the function's real type.
    pub unsafe fn function<F: Copy>(&self, name: &str) -> F {
        // SAFETY: the caller names a function of type F.
        unsafe {
            *self
                ._lib
                .get::<F>(name.as_bytes())
                .expect("function symbol")
        }
    }

    /// Whether the object defines `name`.
    ///
    /// # Safety
    /// Looking a symbol up runs no code; this is safe for any loaded object.
    pub unsafe fn has_symbol(&self, name: &str) -> bool {
        // SAFETY: only the address is looked up.
        unsafe { self._lib.get::<*const u8>(name.as_bytes()).is_ok() }
    }

    /// A data symbol of the loaded object, viewed as a `T`.
    pub fn symbol<T>(&self, name: &str) -> &T {
        // SAFETY: the caller names a symbol the object defines with type T; the
        // reference lives no longer than the library.
        unsafe {
            let s: libloading::Symbol<'_, *const T> =
                self._lib.get(name.as_bytes()).expect("symbol");
            &**s
        }
    }

    /// Calls the entry point with raw pointers (for the status tests).
    ///
    /// # Safety
    /// Whatever the pointers say must hold for the buffers the model touches.
    pub unsafe fn run_raw(&self, i: *const *const u8, o: *const *mut u8, ws: *mut u8) -> i32 {
        unsafe { (self.run)(i, o, ws) }
    }
}

/// Asserts |got − want| ≤ 1e-4 · max(1, max|want|) elementwise (exact for i32/bool;
/// NaN must match NaN).
pub fn assert_close(what: &str, got: &Tensor, want: &Tensor) {
    assert_eq!(got.shape, want.shape, "{what}: shape");
    match (&got.data, &want.data) {
        (TensorData::F32(g), TensorData::F32(w)) => {
            let scale = w
                .iter()
                .filter(|x| x.is_finite())
                .fold(1.0f32, |m, x| m.max(x.abs()));
            let tol = 1e-4 * scale;
            for (i, (a, b)) in g.iter().zip(w).enumerate() {
                let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol;
                assert!(
                    ok,
                    "{what}: element {i}: got {a}, want {b} (tolerance {tol})"
                );
            }
        }
        (TensorData::I32(g), TensorData::I32(w)) => assert_eq!(g, w, "{what}"),
        (TensorData::Bool(g), TensorData::Bool(w)) => assert_eq!(g, w, "{what}"),
        _ => panic!("{what}: dtype {:?} vs {:?}", got.dtype(), want.dtype()),
    }
}

/// Small deterministic PRNG (xorshift) so failures reproduce.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    /// Uniform in [lo, hi).
    pub fn f32(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * ((self.next() >> 40) as f32 / (1u64 << 24) as f32)
    }
    pub fn tensor(&mut self, dtype: DType, shape: &[usize], lo: f32, hi: f32) -> Tensor {
        let n: usize = shape.iter().product();
        match dtype {
            DType::F32 => Tensor::f32(shape.to_vec(), (0..n).map(|_| self.f32(lo, hi)).collect()),
            DType::I32 => Tensor::i32(
                shape.to_vec(),
                (0..n).map(|_| self.f32(lo, hi).floor() as i32).collect(),
            ),
            DType::Bool => Tensor::bool(
                shape.to_vec(),
                (0..n).map(|_| self.next() & 1 == 1).collect(),
            ),
        }
    }
}
