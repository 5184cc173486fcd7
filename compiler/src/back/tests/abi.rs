//! ABI checks: the descriptor read back through the runtime's types, the GEMM epilogue
//! layout the entry point writes, and the C header used from a real C program.

use super::harness::{Rng, load, opts, runtime_lib};
use crate::ir::{DType, Graph, Op, TensorType, UnaryOp};
use std::process::Command;

fn sample() -> Graph {
    let mut g = Graph::new("g");
    let x = g.add_input("image", TensorType::new(DType::F32, &[2, 3]));
    let m = g.add_input("mask", TensorType::new(DType::Bool, &[2, 3]));
    let y = g.add_node(
        Op::Unary(UnaryOp::Exp),
        vec![x],
        vec![TensorType::new(DType::F32, &[2, 3])],
    )[0];
    let z = g.add_node(
        Op::Select,
        vec![m, y, x],
        vec![TensorType::new(DType::F32, &[2, 3])],
    )[0];
    let c = g.add_node(
        Op::Cast { to: DType::I32 },
        vec![z],
        vec![TensorType::new(DType::I32, &[2, 3])],
    )[0];
    g.values[z.index()].name = Some("prob".into());
    g.values[c.index()].name = Some("class".into());
    g.outputs.extend([z, c]);
    g
}

#[test]
fn descriptor_layout_matches_runtime() {
    assert_eq!(
        std::mem::size_of::<nnefc_runtime::ModelInfo>(),
        crate::back::abi::MODEL_INFO_SIZE
    );
    assert_eq!(
        std::mem::size_of::<nnefc_runtime::TensorInfo>(),
        crate::back::abi::TENSOR_INFO_SIZE
    );
    assert_eq!(std::mem::offset_of!(nnefc_runtime::TensorInfo, dims), 16);
    assert_eq!(std::mem::offset_of!(nnefc_runtime::TensorInfo, batched), 24);
    assert_eq!(
        std::mem::offset_of!(nnefc_runtime::ModelInfo, workspace_align),
        48
    );
    assert_eq!(
        std::mem::offset_of!(nnefc_runtime::ModelInfo, workspace_per_worker),
        56
    );
    assert_eq!(
        std::mem::offset_of!(nnefc_runtime::ModelInfo, weights_size),
        64
    );
    assert_eq!(
        std::mem::offset_of!(nnefc_runtime::ModelInfo, weights_model_hash),
        72
    );
    assert_eq!(
        std::mem::offset_of!(nnefc_runtime::ModelInfo, weights_data_hash),
        80
    );
    // The stack records written by `object::define_body`.
    assert_eq!(std::mem::size_of::<nnefc_runtime::GemmArgs>(), 13 * 8);
    assert_eq!(std::mem::offset_of!(nnefc_runtime::GemmArgs, a_packed), 48);
    // The values `object` stores in `a_packed`, as `GemmArgs` documents them.
    use crate::back::kernel::APacking;
    assert_eq!(APacking::None.abi_value(), 0);
    assert_eq!(APacking::Rows6.abi_value(), 1);
    assert_eq!(APacking::Lanes16.abi_value(), 2);
    assert_eq!(nnefc_runtime::gemm::A_LANES, 2);
    assert_eq!(std::mem::offset_of!(nnefc_runtime::GemmArgs, epilogue), 96);
    assert_eq!(std::mem::offset_of!(nnefc_runtime::Parallel, workers), 8);
    assert_eq!(
        std::mem::offset_of!(nnefc_runtime::Parallel, parallel_for),
        16
    );
    // The depthwise record written by `object::define_body`.
    assert_eq!(std::mem::size_of::<nnefc_runtime::DwArgs>(), 27 * 8 + 8);
    assert_eq!(std::mem::offset_of!(nnefc_runtime::DwArgs, x), 14 * 8);
    assert_eq!(std::mem::offset_of!(nnefc_runtime::DwArgs, filter), 18 * 8);
    assert_eq!(std::mem::offset_of!(nnefc_runtime::DwArgs, y), 22 * 8);
    assert_eq!(std::mem::offset_of!(nnefc_runtime::DwArgs, act), 26 * 8);
    assert_eq!(std::mem::offset_of!(nnefc_runtime::DwArgs, hi), 27 * 8 + 4);
    // The direct-convolution record: the depthwise one, then the input channels and the
    // filter and bias strides between groups.
    assert_eq!(std::mem::size_of::<nnefc_runtime::ConvArgs>(), 30 * 8 + 8);
    assert_eq!(
        std::mem::offset_of!(nnefc_runtime::ConvArgs, cin),
        27 * 8 + 8
    );
    assert_eq!(
        std::mem::offset_of!(nnefc_runtime::ConvArgs, bias_sn),
        29 * 8 + 8
    );
    // The fused conv and pool record: the conv's, then the pool's depthwise record.
    assert_eq!(
        std::mem::size_of::<nnefc_runtime::ConvPoolArgs>(),
        30 * 8 + 8 + 27 * 8 + 8
    );
    assert_eq!(
        std::mem::offset_of!(nnefc_runtime::ConvPoolArgs, pool),
        30 * 8 + 8
    );
    // The banded Winograd record: the fused call's, the input transform's, three words.
    assert_eq!(
        std::mem::size_of::<nnefc_runtime::WinogradBandArgs>(),
        30 * 8 + 8 + 27 * 8 + 8 + 3 * 8
    );
    assert_eq!(
        std::mem::offset_of!(nnefc_runtime::WinogradBandArgs, input),
        30 * 8 + 8
    );
    assert_eq!(
        std::mem::offset_of!(nnefc_runtime::WinogradBandArgs, band),
        30 * 8 + 8 + 27 * 8 + 8
    );
    // The inverted-residual record: 42 words, then six f32 bounds.
    assert_eq!(std::mem::size_of::<nnefc_runtime::BlockArgs>(), 42 * 8 + 24);
    assert_eq!(std::mem::offset_of!(nnefc_runtime::BlockArgs, x), 18 * 8);
    assert_eq!(
        std::mem::offset_of!(nnefc_runtime::BlockArgs, project),
        26 * 8
    );
    assert_eq!(
        std::mem::offset_of!(nnefc_runtime::BlockArgs, scratch),
        32 * 8
    );
    assert_eq!(
        std::mem::offset_of!(nnefc_runtime::BlockArgs, serial_band),
        34 * 8
    );
    assert_eq!(std::mem::offset_of!(nnefc_runtime::BlockArgs, xh), 36 * 8);
    assert_eq!(std::mem::offset_of!(nnefc_runtime::BlockArgs, epl), 41 * 8);
    assert_eq!(
        std::mem::offset_of!(nnefc_runtime::BlockArgs, bounds),
        42 * 8
    );
    // The stack epilogue written by `object::epilogue`.
    assert_eq!(std::mem::size_of::<nnefc_runtime::GemmEpilogue>(), 32);
    assert_eq!(
        std::mem::offset_of!(nnefc_runtime::GemmEpilogue, bias_kind),
        8
    );
    assert_eq!(
        std::mem::offset_of!(nnefc_runtime::GemmEpilogue, activation),
        12
    );
    assert_eq!(std::mem::offset_of!(nnefc_runtime::GemmEpilogue, lo), 16);
    assert_eq!(std::mem::offset_of!(nnefc_runtime::GemmEpilogue, hi), 20);
    assert_eq!(
        std::mem::offset_of!(nnefc_runtime::GemmEpilogue, accumulate),
        24
    );
}

#[test]
fn descriptor_lists_inputs_and_outputs() {
    let g = sample();
    let m = load(&g, &opts("desc"));
    let info: &nnefc_runtime::ModelInfo = m.symbol("desc_info");
    // SAFETY: the descriptor's pointers refer into the loaded object, alive as long as `m`.
    let text = unsafe {
        let mut s = format!(
            "{} ws={} align={}\n",
            info.name().to_str().unwrap(),
            info.workspace_size,
            info.workspace_align
        );
        for (kind, list) in [("in", info.inputs()), ("out", info.outputs())] {
            for t in list {
                s += &format!(
                    "{kind} {} {:?} {:?}\n",
                    t.name().to_str().unwrap(),
                    t.dtype(),
                    t.dims()
                );
            }
        }
        s
    };
    expect_test::expect![[r#"
        desc ws=64 align=64
        in image Some(F32) [2, 3]
        in mask Some(Bool) [2, 3]
        out prob Some(F32) [2, 3]
        out class Some(I32) [2, 3]
    "#]]
    .assert_eq(&text);
    assert_eq!(m.art.workspace_size, info.workspace_size);
}

#[test]
fn c_header_macros() {
    let g = sample();
    let art = crate::back::compile(&g, &opts("net")).unwrap();
    let h: String = art
        .header
        .lines()
        .filter(|l| l.starts_with("#define NET_"))
        .map(|l| format!("{l}\n"))
        .collect();
    expect_test::expect![[r##"
        #define NET_H
        #define NET_NUM_INPUTS 2
        #define NET_NUM_OUTPUTS 2
        #define NET_WORKSPACE_SIZE 64 /* bytes of scratch the caller provides */
        #define NET_WORKSPACE_ALIGN 64
        #define NET_WORKSPACE_PER_WORKER 0 /* bytes each worker beyond the first adds */
        #define NET_WORKSPACE_SIZE_FOR(w) ((size_t)NET_WORKSPACE_SIZE + ((w) > 1 ? ((size_t)(w) - 1) * (size_t)NET_WORKSPACE_PER_WORKER : 0))
        #define NET_RUNTIME_BATCH 0 /* 1: net_run_ex takes the number of samples */
        #define NET_WORKSPACE_PER_SAMPLE 0 /* samples run one after another in the same workspace */
        #define NET_WEIGHTS_EXTERNAL 0 /* 1: pass the weights file to net_run_ex */
        #define NET_WEIGHTS_SIZE 0 /* bytes of the weights file (0: weights embedded) */
        #define NET_INPUT0_NAME "image"
        #define NET_INPUT0_SIZE 6 /* elements */
        #define NET_INPUT0_BATCHED 0 /* 1: batch samples of SHAPE along axis 0 */
        #define NET_INPUT0_DTYPE NNEFC_DTYPE_F32
        #define NET_INPUT0_RANK 2
        #define NET_INPUT0_SHAPE {2, 3}
        #define NET_INPUT1_NAME "mask"
        #define NET_INPUT1_SIZE 6 /* elements */
        #define NET_INPUT1_BATCHED 0 /* 1: batch samples of SHAPE along axis 0 */
        #define NET_INPUT1_DTYPE NNEFC_DTYPE_BOOL
        #define NET_INPUT1_RANK 2
        #define NET_INPUT1_SHAPE {2, 3}
        #define NET_OUTPUT0_NAME "prob"
        #define NET_OUTPUT0_SIZE 6 /* elements */
        #define NET_OUTPUT0_BATCHED 0 /* 1: batch samples of SHAPE along axis 0 */
        #define NET_OUTPUT0_DTYPE NNEFC_DTYPE_F32
        #define NET_OUTPUT0_RANK 2
        #define NET_OUTPUT0_SHAPE {2, 3}
        #define NET_OUTPUT1_NAME "class"
        #define NET_OUTPUT1_SIZE 6 /* elements */
        #define NET_OUTPUT1_BATCHED 0 /* 1: batch samples of SHAPE along axis 0 */
        #define NET_OUTPUT1_DTYPE NNEFC_DTYPE_I32
        #define NET_OUTPUT1_RANK 2
        #define NET_OUTPUT1_SHAPE {2, 3}
    "##]]
    .assert_eq(&h);
}

/// Builds `dir/main.c` with `objects` and the runtime library into `dir/main` (warnings
/// are errors; unused `fread` results are allowed).
fn build_c(dir: &std::path::Path, objects: &[&str]) -> std::path::PathBuf {
    let exe = dir.join("main");
    let st = Command::new("cc")
        .current_dir(dir)
        .args([
            "-std=c11",
            "-Wall",
            "-Werror",
            "-Wno-unused-result",
            "main.c",
        ])
        .args(objects)
        .arg(runtime_lib())
        .args(["-lm", "-lpthread", "-ldl", "-o"])
        .arg(&exe)
        .status()
        .unwrap();
    assert!(st.success(), "C program failed to build");
    exe
}

/// A C program includes the header, runs the model through it and prints the result.
#[test]
fn c_program_uses_header_and_descriptor() {
    let g = sample();
    let art = crate::back::compile(&g, &opts("net")).unwrap();
    let dir = super::harness::scratch_dir();
    std::fs::write(dir.join("net.o"), &art.object).unwrap();
    std::fs::write(dir.join("net.h"), &art.header).unwrap();
    std::fs::write(
        dir.join("main.c"),
        r#"#include <stdio.h>
#include <stdalign.h>
#include "net.h"
int main(void) {
    float image[NET_INPUT0_SIZE] = {0, 1, 2, -1, -2, 0.5f};
    unsigned char mask[NET_INPUT1_SIZE] = {1, 0, 1, 0, 1, 0};
    float prob[NET_OUTPUT0_SIZE];
    int cls[NET_OUTPUT1_SIZE];
    static alignas(NET_WORKSPACE_ALIGN) unsigned char ws[NET_WORKSPACE_SIZE + 1];
    const void *in[] = {image, mask};
    void *out[] = {prob, cls};
    size_t shape[] = NET_INPUT0_SHAPE;
    int s = net_run(in, out, ws);
    printf("status %d rank %d shape %zux%zu in0 %s\n", s, NET_INPUT0_RANK, shape[0], shape[1], net_info.inputs[0].name);
    for (int i = 0; i < NET_OUTPUT0_SIZE; i++) printf("%.4f %d\n", prob[i], cls[i]);
    printf("misaligned %d\n", net_run(in, out, ws + 1));
    return 0;
}
"#,
    )
    .unwrap();
    let exe = build_c(&dir, &["net.o"]);
    let out = Command::new(&exe).output().unwrap();
    expect_test::expect![[r#"
        status 0 rank 2 shape 2x3 in0 image
        1.0000 1
        1.0000 1
        7.3891 7
        -1.0000 -1
        0.1353 0
        0.5000 0
        misaligned 2
    "#]]
    .assert_eq(&String::from_utf8_lossy(&out.stdout));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = Rng::new(0);
}

/// The Rust bindings compile (against the runtime rlib), link with the object, and run.
#[test]
fn rust_bindings_build_and_run() {
    let g = sample();
    let art = crate::back::compile(&g, &opts("net")).unwrap();
    let dir = super::harness::scratch_dir();
    std::fs::write(dir.join("net.o"), &art.object).unwrap();
    let main = format!(
        "{}\nfn assert_send<T: Send>() {{}}\nfn main() {{\n    assert_send::<net::Model>();\n    let mut m = net::Model::new();\n    let mut p = [0f32; 6];\n    let mut c = [0i32; 6];\n    m.run(&[0.0, 1.0, 2.0, -1.0, -2.0, 0.5], &[true, false, true, false, true, false], &mut p, &mut c).unwrap();\n    let e = m.run(&[0.0; 5], &[true; 6], &mut p, &mut c).unwrap_err();\n    let info = net::info();\n    println!(\"{{c:?}} {{e}} {{}}\", info.num_inputs);\n}}\n",
        art.rust
    );
    std::fs::write(dir.join("main.rs"), main).unwrap();
    let lib = runtime_lib();
    let deps = lib.parent().unwrap().join("deps");
    let rlib = lib.with_extension("rlib");
    let st = Command::new("rustc")
        .current_dir(&dir)
        .args([
            "--edition",
            "2024",
            "main.rs",
            "-o",
            "main",
            "-C",
            "link-arg=net.o",
        ])
        .arg("--extern")
        .arg(format!("nnefc_runtime={}", rlib.display()))
        .arg("-L")
        .arg(format!("dependency={}", deps.display()))
        .status()
        .unwrap();
    assert!(st.success(), "bindings failed to build");
    let out = Command::new(dir.join("main")).output().unwrap();
    expect_test::expect![[r#"
        [1, 1, 7, -1, 0, 0] tensor `image` needs 6 elements, got 5 2
    "#]]
    .assert_eq(&String::from_utf8_lossy(&out.stdout));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The kernel program as `nnefc dump --stage kernels` shows it.
#[test]
fn kernel_dump() {
    let mut g = Graph::new("k");
    let x = g.add_input("x", TensorType::new(DType::F32, &[2, 8]));
    let s = g.add_node(
        Op::Softmax { axes: vec![1] },
        vec![x],
        vec![TensorType::new(DType::F32, &[2, 8])],
    )[0];
    g.outputs.push(s);
    let art = crate::back::compile(&g, &opts("k")).unwrap();
    expect_test::expect![[r#"
        b0: f32[16] input 0
        b1: f32[16] output 0
        b2: f32[2] workspace @0
        b3: f32[2] workspace @64
        workspace 128 bytes + 0 per extra worker
        kernel k_k0_n0_softmax_max
          loop i0 < 2
          loop i1 < 8 x4 reduce
          a0 = b0[0 + 8i0 + 1i1]
          a1 = b2[0 + 1i0]
            e0:f32 = load a0
          reduce Max
            r0:f32 = acc
          store a1 = r0
        kernel k_k1_n0_softmax_sum
          loop i0 < 2
          loop i1 < 8 x4 reduce
          a0 = b0[0 + 8i0 + 1i1]
          a1 = b2[0 + 1i0]
          a2 = b3[0 + 1i0]
            e0:f32 = load a0
            e1:f32 = load a1
            e2:f32 = sub e0, e1
            e3:f32 = exp e2
          reduce Sum
            r0:f32 = acc
          store a2 = r0
        kernel k_k2_n0_softmax_div
          loop i0 < 2
          loop i1 < 8 x4
          a0 = b0[0 + 8i0 + 1i1]
          a1 = b2[0 + 1i0]
          a2 = b3[0 + 1i0]
          a3 = b1[0 + 8i0 + 1i1]
            e0:f32 = load a0
            e1:f32 = load a1
            e2:f32 = load a2
            e3:f32 = sub e0, e1
            e4:f32 = exp e3
            e5:f32 = div e4, e2
          store a3 = e5
    "#]]
    .assert_eq(&art.kernels);
}

/// A profiled object: the step table names each step's node, op, shape and work, and
/// `PREFIX_run_profiled` calls the hook once per step, in order, with the same outputs
/// as `PREFIX_run`; an unprofiled object has neither symbol.
#[test]
fn profiled_object_reports_every_step() {
    let mut g = Graph::new("p");
    let a = g.add_input("a", TensorType::new(DType::F32, &[4, 8]));
    let b = g.add_input("b", TensorType::new(DType::F32, &[8, 5]));
    let c = g.add_node(
        Op::MatMul {
            transpose_a: false,
            transpose_b: false,
        },
        vec![a, b],
        vec![TensorType::new(DType::F32, &[4, 5])],
    )[0];
    g.values[c.index()].name = Some("prod".into());
    let r = g.add_node(
        Op::Unary(UnaryOp::Exp),
        vec![c],
        vec![TensorType::new(DType::F32, &[4, 5])],
    )[0];
    g.values[r.index()].name = Some("out".into());
    g.outputs.push(r);
    let mut o = opts("p");
    o.profile = true;
    let m = load(&g, &o);
    let first: &u8 = m.symbol("p_profile_table");
    // SAFETY: the table is a NUL-terminated string in the object's data.
    let table = unsafe { std::ffi::CStr::from_ptr(first as *const u8 as *const std::ffi::c_char) }
        .to_string_lossy()
        .into_owned();
    expect_test::expect![[r#"
        0	prod	matmul	4x5	320
        1	out	exp	4x5	0
    "#]]
    .assert_eq(&table);
    type Hook = unsafe extern "C" fn(*mut std::ffi::c_void, usize);
    type Profiled = unsafe extern "C" fn(
        usize,
        *const u8,
        *const *const u8,
        *const *mut u8,
        *mut u8,
        *const nnefc_runtime::Parallel,
        Hook,
        *mut std::ffi::c_void,
    ) -> i32;
    unsafe extern "C" fn hook(ctx: *mut std::ffi::c_void, step: usize) {
        // SAFETY: ctx is the Vec below.
        unsafe { (*(ctx as *mut Vec<usize>)).push(step) };
    }
    // SAFETY: a profiled object exports this function with this type.
    let run: Profiled = unsafe { m.function("p_run_profiled") };
    let mut rng = Rng::new(7);
    let ta = rng.tensor(DType::F32, &[4, 8], -1.0, 1.0);
    let tb = rng.tensor(DType::F32, &[8, 5], -1.0, 1.0);
    let (xa, xb) = (ta.to_le_bytes(), tb.to_le_bytes());
    let mut out = vec![0u8; 20 * 4];
    let mut ws = vec![0u64; m.art.interface.workspace_size_for(1).div_ceil(8) + 8];
    let wsp = ((ws.as_mut_ptr() as usize).div_ceil(64) * 64) as *mut u8;
    let mut seen: Vec<usize> = Vec::new();
    // SAFETY: buffers sized from the interface, workspace aligned, hook writes `seen`.
    let status = unsafe {
        run(
            0,
            std::ptr::null(),
            [xa.as_ptr(), xb.as_ptr()].as_ptr(),
            [out.as_mut_ptr()].as_ptr(),
            wsp,
            std::ptr::null(),
            hook,
            &mut seen as *mut Vec<usize> as *mut std::ffi::c_void,
        )
    };
    assert_eq!(status, 0);
    assert_eq!(seen, vec![0, 1]);
    let plain = m.run(&[ta, tb]).expect("runs");
    assert_eq!(plain[0].to_le_bytes(), out);
    // Off by default: no table, no profiled entry.
    let m2 = load(&g, &opts("q"));
    // SAFETY: only probing for the symbol's presence.
    assert!(!unsafe { m2.has_symbol("q_run_profiled") });
    assert!(!unsafe { m2.has_symbol("q_profile_table") });
}

/// A graph with constants on both paths a constant takes: a runtime GEMM operand
/// (linear: packed filter and bias) and a kernel operand (an element-wise multiply).
fn weighted() -> Graph {
    use crate::ir::{BinaryOp, Tensor};
    let mut g = Graph::new("w");
    let x = g.add_input("x", TensorType::new(DType::F32, &[2, 5]));
    let f = g.add_const(
        Tensor::f32(vec![3, 5], (0..15).map(|i| i as f32 * 0.25 - 1.0).collect()),
        Some("filter".into()),
        None,
    );
    let b = g.add_const(Tensor::f32(vec![1, 3], vec![0.5, -1.0, 2.0]), None, None);
    let s = g.add_const(
        Tensor::f32(vec![2, 3], vec![1., 2., 3., 4., 5., 6.]),
        None,
        None,
    );
    let y = g.add_node(
        Op::Linear,
        vec![x, f, b],
        vec![TensorType::new(DType::F32, &[2, 3])],
    )[0];
    let z = g.add_node(
        Op::Binary(BinaryOp::Mul),
        vec![y, s],
        vec![TensorType::new(DType::F32, &[2, 3])],
    )[0];
    g.values[z.index()].name = Some("y".into());
    g.outputs.push(z);
    g
}

/// External weights through the C ABI: the object has no weights, `run_ex` with the file
/// gives the embedded object's outputs, and every wrong file gives its documented status
/// from `run_ex` (O(1) header checks) and `check_weights` (the whole file).
#[test]
fn external_weights_c_program() {
    let g = weighted();
    let embedded = crate::back::compile(&g, &opts("emb")).unwrap();
    assert!(embedded.weights.is_none());
    let mut o = opts("ext");
    o.external_weights = true;
    let art = crate::back::compile(&g, &o).unwrap();
    let file = art.weights.clone().expect("a weights file");
    assert_eq!(art.interface.weights.map(|w| w.size), Some(file.len()));
    assert!(art.kernels.contains("weights @64"), "{}", art.kernels);
    assert!(!art.kernels.contains(" const "), "{}", art.kernels);
    // The same model at another prefix has the same file (prefixes name symbols only).
    let mut o2 = o.clone();
    o2.prefix = "ext2".into();
    assert_eq!(
        crate::back::compile(&g, &o2).unwrap().weights,
        Some(file.clone())
    );
    // Another model's file: same layout, other data.
    let mut other_g = weighted();
    if let crate::ir::TensorData::F32(d) = &mut other_g.consts[1].tensor.data {
        d[0] = 7.0;
    }
    let other = crate::back::compile(&other_g, &o).unwrap().weights.unwrap();
    assert_ne!(other, file);

    let dir = super::harness::scratch_dir();
    std::fs::write(dir.join("emb.o"), &embedded.object).unwrap();
    std::fs::write(dir.join("emb.h"), &embedded.header).unwrap();
    std::fs::write(dir.join("ext.o"), &art.object).unwrap();
    std::fs::write(dir.join("ext.h"), &art.header).unwrap();
    std::fs::write(dir.join("ext.weights"), &file).unwrap();
    std::fs::write(dir.join("other.weights"), &other).unwrap();
    std::fs::write(
        dir.join("main.c"),
        r#"#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdalign.h>
#include "emb.h"
#include "ext.h"
static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = aligned_alloc(64, (*len + 64 + 63) / 64 * 64);
    fread(p, 1, *len, f);
    fclose(f);
    return p;
}
int main(void) {
    float x[EXT_INPUT0_SIZE], a[EXT_OUTPUT0_SIZE], b[EXT_OUTPUT0_SIZE];
    for (int i = 0; i < EXT_INPUT0_SIZE; i++) x[i] = (float)i * 0.5f - 2.0f;
    static alignas(64) unsigned char ws[EXT_WORKSPACE_SIZE + EMB_WORKSPACE_SIZE + 64];
    const void *in[] = {x};
    void *oa[] = {a}, *ob[] = {b};
    size_t len, olen;
    unsigned char *w = slurp("ext.weights", &len);
    unsigned char *ow = slurp("other.weights", &olen);
    printf("external %d size %d info %d\n", EXT_WEIGHTS_EXTERNAL, len == EXT_WEIGHTS_SIZE,
           ext_info.weights_size == len);
    printf("embedded %d size %d\n", EMB_WEIGHTS_EXTERNAL, EMB_WEIGHTS_SIZE);
    int se = emb_run(in, oa, ws);
    int sx = ext_run_ex(0, w, in, ob, ws, NULL);
    printf("runs %d %d same %d\n", se, sx, memcmp(a, b, sizeof a) == 0);
    printf("embedded ignores weights %d\n", emb_run_ex(0, NULL, in, oa, ws, NULL));
    printf("run without weights %d\n", ext_run(in, ob, ws));
    printf("run_ex null %d\n", ext_run_ex(0, NULL, in, ob, ws, NULL));
    printf("batch 2 %d\n", ext_run_ex(2, w, in, ob, ws, NULL));
    printf("check ok %d\n", ext_check_weights(w, len));
    printf("check null %d\n", ext_check_weights(NULL, len));
    printf("check truncated %d %d\n", ext_check_weights(w, len - 64), ext_check_weights(w, 10));
    printf("other model %d %d\n", ext_check_weights(ow, olen), ext_run_ex(0, ow, in, ob, ws, NULL));
    memmove(w + 1, w, len);
    printf("misaligned %d %d\n", ext_check_weights(w + 1, len), ext_run_ex(0, w + 1, in, ob, ws, NULL));
    memmove(w, w + 1, len);
    w[len - 1] ^= 1;
    printf("corrupt data %d run %d\n", ext_check_weights(w, len), ext_run_ex(0, w, in, ob, ws, NULL));
    w[len - 1] ^= 1;
    w[0] ^= 1;
    printf("bad magic %d %d\n", ext_check_weights(w, len), ext_run_ex(0, w, in, ob, ws, NULL));
    w[0] ^= 1;
    w[8] = 2;
    printf("bad version %d %d\n", ext_check_weights(w, len), ext_run_ex(0, w, in, ob, ws, NULL));
    return 0;
}
"#,
    )
    .unwrap();
    let exe = build_c(&dir, &["emb.o", "ext.o"]);
    let out = Command::new(&exe).current_dir(&dir).output().unwrap();
    expect_test::expect![[r#"
        external 1 size 1 info 1
        embedded 0 size 0
        runs 0 0 same 1
        embedded ignores weights 0
        run without weights 1
        run_ex null 1
        batch 2 3
        check ok 0
        check null 1
        check truncated 8 8
        other model 9 9
        misaligned 2 2
        corrupt data 8 run 0
        bad magic 8 8
        bad version 8 8
    "#]]
    .assert_eq(&String::from_utf8_lossy(&out.stdout));
    let _ = std::fs::remove_dir_all(&dir);
}
