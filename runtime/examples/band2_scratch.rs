//! scratch: two-thread fused inverted residual vs layer by layer (not committed)
use nnefc_runtime::{DwArgs, GemmArgs, GemmEpilogue, nnefc_dwconv, nnefc_sgemm_parallel, pack_a, sgemm_scratch_bytes, ThreadPool, Parallel};
use std::time::Instant;
use core::ffi::c_void;

#[derive(Clone, Copy)]
struct Stage { cin: usize, mid: usize, cout: usize, h: usize, s: usize }
const STAGES: [Stage; 7] = [
    Stage { cin: 16, mid: 96, cout: 24, h: 112, s: 2 },
    Stage { cin: 24, mid: 144, cout: 24, h: 56, s: 1 },
    Stage { cin: 24, mid: 144, cout: 32, h: 56, s: 2 },
    Stage { cin: 32, mid: 192, cout: 32, h: 28, s: 1 },
    Stage { cin: 64, mid: 384, cout: 64, h: 14, s: 1 },
    Stage { cin: 96, mid: 576, cout: 96, h: 14, s: 1 },
    Stage { cin: 160, mid: 960, cout: 160, h: 7, s: 1 },
];
#[repr(C, align(64))] #[derive(Clone, Copy)] struct Line([u8; 64]);

struct Run { st: Stage, x: Vec<f32>, expand: Vec<f32>, project: Vec<f32>, filter: Vec<f32>, bias: Vec<f32>, scratch: Vec<Line>, stride: usize }

unsafe fn gemm(r: &Run, m: usize, n: usize, k: usize, project: bool, b: *const f32, rsb: usize, c: *mut f32, rsc: usize, par: *const Parallel, scratch: *mut u8) {
    let epi = GemmEpilogue { bias: r.bias.as_ptr(), bias_kind: 1, activation: 2, lo: 0.0, hi: 6.0, accumulate: 0 };
    let a = if project { &r.project } else { &r.expand };
    let g = GemmArgs { m, n, k, a: a.as_ptr(), rsa: 0, csa: 0, a_packed: 1, b, rsb: rsb as isize, csb: 1, c, rsc: rsc as isize, epilogue: &epi };
    unsafe { nnefc_sgemm_parallel(&g, par, scratch, r.stride) }
}
unsafe fn dw(r: &Run, x: *const f32, rows: usize, x_sc: usize, pt: usize, out_rows: usize, y: *mut f32, y_sc: usize, par: *const Parallel) {
    let (h, oh) = (r.st.h, r.st.h / r.st.s);
    let a = DwArgs { n: 1, c: r.st.mid, h: rows, w: h, oh: out_rows, ow: oh, kh: 3, kw: 3, sh: r.st.s, sw: r.st.s, dh: 1, dw: 1, pt, pl: 1,
        x, x_sn: 0, x_sc: x_sc as isize, x_sh: h as isize, filter: r.filter.as_ptr(), bias: r.bias.as_ptr(), bias_sc: 1, res: core::ptr::null(),
        y, y_sn: 0, y_sc: y_sc as isize, y_sh: oh as isize, act: 2, lo: 0.0, hi: 6.0 };
    unsafe { nnefc_dwconv(&a, par) }
}
unsafe fn layers(r: &Run, e: *mut f32, d: *mut f32, y: *mut f32, par: *const Parallel) {
    let st = r.st; let hw = st.h * st.h; let ohw = (st.h / st.s) * (st.h / st.s);
    let sc = r.scratch.as_ptr() as *mut u8;
    unsafe {
        gemm(r, st.mid, hw, st.cin, false, r.x.as_ptr(), hw, e, hw, par, sc);
        dw(r, e, st.h, hw, 1, st.h / st.s, d, ohw, par);
        gemm(r, st.cout, ohw, st.mid, true, d, ohw, y, ohw, par, sc);
    }
}
// output rows [ob, oe) in bands of `band`, with band buffers e, d, serial
unsafe fn banded(r: &Run, band: usize, ob: usize, oe: usize, e: *mut f32, d: *mut f32, y: *mut f32, sc: *mut u8) {
    let st = r.st; let (h, s, oh) = (st.h, st.s, st.h / st.s);
    let mut held: Option<(usize, usize)> = None;
    let mut o0 = ob;
    while o0 < oe {
        let o1 = (o0 + band).min(oe);
        let (r0, r1) = ((o0 * s).saturating_sub(1), ((o1 - 1) * s + 2).min(h));
        let rows = r1 - r0;
        let mut first_new = r0;
        if let Some((p0, p1)) = held.filter(|&(_, p1)| p1 > r0) {
            let (keep, prev) = (p1 - r0, p1 - p0);
            for c in 0..st.mid {
                let from = c * prev * h + (r0 - p0) * h;
                unsafe { core::ptr::copy(e.add(from), e.add(c * rows * h), keep * h) };
            }
            first_new = p1;
        }
        unsafe {
            gemm(r, st.mid, (r1 - first_new) * h, st.cin, false, r.x.as_ptr().add(first_new * h), h * h, e.add((first_new - r0) * h), rows * h, core::ptr::null(), sc);
            held = Some((r0, r1));
            let pt = usize::from(o0 == 0);
            dw(r, e, rows, rows * h, pt, o1 - o0, d, (o1 - o0) * oh, core::ptr::null());
            gemm(r, st.cout, (o1 - o0) * oh, st.mid, true, d, (o1 - o0) * oh, y.add(o0 * oh), oh * oh, core::ptr::null(), sc);
        }
        o0 = o1;
    }
}
struct Job<'a> { r: &'a Run, band: usize, parts: usize, e: Vec<*mut f32>, d: Vec<*mut f32>, y: *mut f32 }
unsafe extern "C" fn task(ctx: *mut c_void, i: usize, w: usize) {
    let j = unsafe { &*(ctx as *const Job) };
    let oh = j.r.st.h / j.r.st.s;
    let sc = unsafe { (j.r.scratch.as_ptr() as *mut u8).add(w * j.r.stride) };
    unsafe { banded(j.r, j.band, i * oh / j.parts, (i + 1) * oh / j.parts, j.e[w], j.d[w], j.y, sc) }
}

fn best(reps: usize, mut f: impl FnMut()) -> f64 {
    (0..5).map(|_| { let t = Instant::now(); for _ in 0..reps { f(); } t.elapsed().as_secs_f64() / reps as f64 * 1e6 }).fold(f64::MAX, f64::min)
}
fn main() {
    let band: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(8);
    let threads: usize = std::env::args().nth(2).and_then(|a| a.parse().ok()).unwrap_or(2);
    let pool = ThreadPool::new(threads).unwrap();
    let par = pool.parallel();
    let mut tot = (0.0, 0.0);
    for st in STAGES {
        let val = |i: usize, m: usize| ((i * 7 % m) as f32 - (m / 2) as f32) * 0.05;
        let we: Vec<f32> = (0..st.mid * st.cin).map(|i| val(i, 11)).collect();
        let wp: Vec<f32> = (0..st.cout * st.mid).map(|i| val(i, 7)).collect();
        let stride = (sgemm_scratch_bytes(st.mid, st.h * st.h, st.cin).max(sgemm_scratch_bytes(st.cout, st.h * st.h, st.mid))).div_ceil(64) * 64;
        let r = Run { st, x: (0..st.cin * st.h * st.h).map(|i| val(i, 13)).collect(), expand: pack_a(st.mid, st.cin, &we, st.cin, 1), project: pack_a(st.cout, st.mid, &wp, st.mid, 1),
            filter: (0..st.mid * 9).map(|i| val(i, 5)).collect(), bias: (0..st.mid.max(st.cout)).map(|i| val(i, 3)).collect(), scratch: vec![Line([0; 64]); stride / 64 * threads], stride };
        let oh = st.h / st.s; let rows_in = (band - 1) * st.s + 3;
        let mut e = vec![0f32; st.mid * st.h * st.h]; let mut d = vec![0f32; st.mid * oh * oh];
        let mut y = vec![0f32; st.cout * oh * oh]; let mut yb = vec![0f32; st.cout * oh * oh];
        let mut ebs: Vec<Vec<f32>> = (0..threads).map(|_| vec![0f32; st.mid * rows_in.min(st.h) * st.h]).collect();
        let mut dbs: Vec<Vec<f32>> = (0..threads).map(|_| vec![0f32; st.mid * band.min(oh) * oh]).collect();
        let job = Job { r: &r, band, parts: threads, e: ebs.iter_mut().map(|v| v.as_mut_ptr()).collect(), d: dbs.iter_mut().map(|v| v.as_mut_ptr()).collect(), y: yb.as_mut_ptr() };
        let (ep, dp, yp) = (e.as_mut_ptr(), d.as_mut_ptr(), y.as_mut_ptr());
        let runl = || unsafe { layers(&r, ep, dp, yp, &par) };
        let runb = || unsafe { pool.parallel_for(task, &job as *const Job as *mut c_void, threads) };
        runl(); runb();
        let same = y.iter().zip(&yb).all(|(a, b)| a.to_bits() == b.to_bits());
        let reps = (3e7 / (st.mid * st.h * st.h) as f64).max(20.0) as usize;
        let (mut tl, mut tb) = (f64::MAX, f64::MAX);
        for _ in 0..3 { tl = tl.min(best(reps, runl)); tb = tb.min(best(reps, runb)); }
        tot.0 += tl; tot.1 += tb;
        println!("{:>3}→{:>3}→{:>3} at {:>3}² s{} layers {tl:8.1} banded {tb:8.1} {:+6.1}% {}", st.cin, st.mid, st.cout, st.h, st.s, (tb / tl - 1.0) * 100.0, if same { "" } else { "BITS DIFFER" });
    }
    println!("sum layers {:.1} banded {:.1}", tot.0, tot.1);
}
