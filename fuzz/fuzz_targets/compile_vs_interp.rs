//! Differential fuzz target: the bytes choose a small valid NNEF graph (a chain of up to
//! eight ops over a `[1, C, H, W]` input: element-wise ops, clamp, convolutions dense and
//! depthwise with strides and padding, pools, reductions, softmax, transpose, concat);
//! it is lowered by the front end, run by the reference interpreter, compiled to a
//! self-contained object (no runtime symbols), linked with `cc -shared`, loaded and run
//! serially and through `PREFIX_run_parallel` with a reverse-order fake pool. The target
//! panics (a finding) when the compiled outputs differ from the interpreter's beyond
//! `1e-4 · max(1, max|expected|)` (NaN must meet NaN) or the two compiled runs differ in
//! any bit. Inputs the generator cannot turn into a graph the front end accepts are
//! skipped: they test the generator, not the compiler.
//!
//! Needs `cc` on the PATH. Slow by fuzzing standards (one link per input, tens per
//! second): run it for long periods, e.g. `-max_total_time=3600`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nnefc_compiler::back::{BackendOptions, compile};
use nnefc_compiler::front::{FrontOptions, lower_source};
use nnefc_compiler::ir::{Tensor, TensorData, interp};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Reads bytes as small numbers; zeros once exhausted.
struct Bytes<'a>(&'a [u8]);
impl Bytes<'_> {
    fn next(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn below(&mut self, n: u8) -> u8 {
        self.next() % n.max(1)
    }
}

/// Deterministic values in [-1, 1) for inputs and weights.
fn values(seed: u32, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (s >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

/// The graph text and its variables (label → tensor).
fn generate(b: &mut Bytes<'_>) -> (String, Vec<(String, Tensor)>, Vec<usize>) {
    let (mut c, mut h, mut w) = (
        1 + b.below(6) as usize,
        1 + b.below(12) as usize,
        1 + b.below(12) as usize,
    );
    let shape = vec![1, c, h, w];
    let mut body = String::new();
    let mut vars = Vec::new();
    let _ = writeln!(
        body,
        "    t0 = external<scalar>(shape = [1, {c}, {h}, {w}]);"
    );
    let ops = 1 + b.below(8);
    let mut cur = 0usize;
    for i in 1..=ops as usize {
        let x = format!("t{cur}");
        let y = format!("t{i}");
        let line = match b.below(14) {
            0 => format!("{y} = relu({x});"),
            1 => format!("{y} = sigmoid({x});"),
            2 => format!("{y} = tanh({x});"),
            3 => format!("{y} = add({x}, {x});"),
            4 => format!("{y} = mul({x}, {}.5);", b.below(3)),
            5 => {
                let lo = -(b.below(3) as f32) * 0.5;
                format!(
                    "{y} = clamp({x}, {lo:.1}, {:.1});",
                    lo + 0.5 + b.below(3) as f32 * 0.5
                )
            }
            6 | 7 | 8 => {
                // Conv: dense or depthwise, 1×1 or 3×3, stride 1 or 2, zero padding.
                let dw = b.below(2) == 1;
                let k = if b.below(2) == 0 { 1 } else { 3 };
                let s = 1 + b.below(2) as usize;
                let p = if k == 3 { b.below(2) as usize } else { 0 };
                if h + 2 * p < k || w + 2 * p < k {
                    format!("{y} = neg({x});")
                } else {
                    let cout = if dw { c } else { 1 + b.below(6) as usize };
                    let cin_g = if dw { 1 } else { c };
                    let fl = format!("f{i}");
                    let bl = format!("b{i}");
                    vars.push((
                        fl.clone(),
                        Tensor::f32(
                            vec![cout, cin_g, k, k],
                            values(i as u32 * 7 + 1, cout * cin_g * k * k),
                        ),
                    ));
                    vars.push((
                        bl.clone(),
                        Tensor::f32(vec![1, cout], values(i as u32 * 7 + 2, cout)),
                    ));
                    let _ = writeln!(
                        body,
                        "    w{i} = variable<scalar>(shape = [{cout}, {cin_g}, {k}, {k}], label = '{fl}');"
                    );
                    let _ = writeln!(
                        body,
                        "    c{i} = variable<scalar>(shape = [1, {cout}], label = '{bl}');"
                    );
                    let groups = if dw { 0 } else { 1 };
                    h = (h + 2 * p - k) / s + 1;
                    w = (w + 2 * p - k) / s + 1;
                    c = cout;
                    format!(
                        "{y} = conv({x}, w{i}, c{i}, border = 'constant', padding = [({p}, {p}), ({p}, {p})], stride = [{s}, {s}], groups = {groups});"
                    )
                }
            }
            9 => {
                let s = 1 + b.below(2) as usize;
                if h < 1 || w < 1 {
                    format!("{y} = abs({x});")
                } else {
                    // 3×3 window, padding 1 on each side, ignore border.
                    h = (h + 2 - 3) / s + 1;
                    w = (w + 2 - 3) / s + 1;
                    let op = if b.below(2) == 0 {
                        "max_pool"
                    } else {
                        "avg_pool"
                    };
                    format!(
                        "{y} = {op}({x}, size = [1, 1, 3, 3], border = 'ignore', padding = [(0, 0), (0, 0), (1, 1), (1, 1)], stride = [1, 1, {s}, {s}]);"
                    )
                }
            }
            10 => {
                let op = ["sum_reduce", "max_reduce", "mean_reduce"][b.below(3) as usize];
                h = 1;
                w = 1;
                format!("{y} = {op}({x}, axes = [2, 3]);")
            }
            11 => format!("{y} = softmax({x}, axes = [1]);"),
            12 => {
                std::mem::swap(&mut h, &mut w);
                format!("{y} = transpose({x}, axes = [0, 1, 3, 2]);")
            }
            _ => {
                c *= 2;
                format!("{y} = concat([{x}, {x}], axis = 1);")
            }
        };
        let _ = writeln!(body, "    {line}");
        cur = i;
    }
    let text = format!("version 1.0;\n\ngraph g( t0 ) -> ( t{cur} )\n{{\n{body}}}\n");
    (text, vars, shape)
}

/// Runs the compiled object `obj` (prefix `g`) on `input`, serially and with a
/// reverse-order fake pool of three workers.
fn run_object(
    obj: &[u8],
    workspace: usize,
    per_worker: usize,
    out_len: usize,
    input: &[f32],
) -> Option<(Vec<f32>, Vec<f32>)> {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "nnefc-fuzz-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).ok()?;
    let (o, so) = (dir.join("m.o"), dir.join("m.so"));
    std::fs::write(&o, obj).ok()?;
    let ok = std::process::Command::new("cc")
        .arg("-shared")
        .arg(&o)
        .arg("-o")
        .arg(&so)
        .status()
        .ok()?
        .success();
    assert!(ok, "cc could not link the object");
    type Run = unsafe extern "C" fn(
        *const *const u8,
        *const *mut u8,
        *mut u8,
        *const nnefc_runtime_par::Parallel,
    ) -> i32;
    // SAFETY: a freshly compiled nnefc object with the ABI above.
    let result = unsafe {
        let lib = libloading::Library::new(&so).expect("load");
        let run: Run = *lib.get::<Run>(b"g_run_parallel\0").expect("entry");
        let mut ws1 = vec![0u64; workspace.div_ceil(8) + 8];
        let mut ws3 = vec![0u64; (workspace + 2 * per_worker).div_ceil(8) + 8];
        let align = |v: &mut Vec<u64>| ((v.as_mut_ptr() as usize).div_ceil(64) * 64) as *mut u8;
        let mut a = vec![0f32; out_len];
        let mut b2 = vec![0f32; out_len];
        let ins = [input.as_ptr() as *const u8];
        let s1 = run(
            ins.as_ptr(),
            [a.as_mut_ptr() as *mut u8].as_ptr(),
            align(&mut ws1),
            std::ptr::null(),
        );
        let par = nnefc_runtime_par::Parallel {
            pool: std::ptr::null_mut(),
            workers: 3,
            parallel_for: Some(nnefc_runtime_par::reverse),
        };
        let s2 = run(
            ins.as_ptr(),
            [b2.as_mut_ptr() as *mut u8].as_ptr(),
            align(&mut ws3),
            &par,
        );
        assert_eq!((s1, s2), (0, 0), "status");
        drop(lib);
        (a, b2)
    };
    let _ = std::fs::remove_dir_all(&dir);
    Some(result)
}

/// The `nnefc_parallel` ABI (as `nnefc_runtime::Parallel`), declared here so the target
/// needs only the compiler crate.
mod nnefc_runtime_par {
    use core::ffi::c_void;
    pub type Task = unsafe extern "C" fn(*mut c_void, usize, usize);
    #[repr(C)]
    pub struct Parallel {
        pub pool: *mut c_void,
        pub workers: usize,
        pub parallel_for: Option<unsafe extern "C" fn(*mut c_void, Task, *mut c_void, usize)>,
    }
    /// Runs the tasks in reverse order, task `i` as worker `i % 3`.
    pub unsafe extern "C" fn reverse(_pool: *mut c_void, task: Task, ctx: *mut c_void, n: usize) {
        for i in (0..n).rev() {
            // SAFETY: the parallel_for contract, forwarded.
            unsafe { task(ctx, i, i % 3) };
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let (text, vars, shape) = generate(&mut b);
    let lookup = |label: &str| {
        vars.iter()
            .find(|(l, _)| l == label)
            .map(|(_, t)| t.clone())
    };
    let Ok(lowered) = lower_source("g", &text, &lookup, &FrontOptions::default()) else {
        return;
    };
    let n: usize = shape.iter().product();
    let input = Tensor::f32(shape, values(data.len() as u32, n));
    let Ok(want) = interp::run(&lowered.graph, std::slice::from_ref(&input)) else {
        return;
    };
    let opts = BackendOptions {
        prefix: "g".into(),
        self_contained: Some(true),
        ..BackendOptions::default()
    };
    let art =
        compile(&lowered.graph, &opts).unwrap_or_else(|e| panic!("compile failed: {e}\n{text}"));
    let TensorData::F32(x) = &input.data else {
        return;
    };
    let Some(TensorData::F32(want)) = want.first().map(|t| &t.data) else {
        return;
    };
    let Some((serial, parallel)) = run_object(
        &art.object,
        art.interface.workspace_size,
        art.interface.worker_workspace,
        want.len(),
        x,
    ) else {
        return;
    };
    assert!(
        serial
            .iter()
            .zip(&parallel)
            .all(|(a, b)| a.to_bits() == b.to_bits()),
        "serial and 3-worker runs differ\n{text}"
    );
    let scale = want
        .iter()
        .fold(1f32, |m, v| if v.is_finite() { m.max(v.abs()) } else { m });
    for (i, (g, e)) in serial.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && e.is_nan()) || g == e || (g - e).abs() <= 1e-4 * scale;
        assert!(ok, "output {i}: compiled {g}, interpreter {e}\n{text}");
    }
});
