use zermelo_storage::*;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let t = Table::open(std::path::Path::new(&args[1])).unwrap();
    let levels: Vec<i32> = args[2].split(',').map(|s| s.parse().unwrap()).collect();
    let bvs: Vec<u32> = args[3].split(',').map(|s| s.parse().unwrap()).collect();
    let mut halves: [Vec<(SliceKey, Vec<u16>)>; 2] = [vec![], vec![]];
    for (i, e) in t.slices().iter().enumerate() {
        let v = t.read_slice_on(i, 2).unwrap();
        let h = v.len() / 2;
        for side in 0..2 {
            let mut part = v[side * h..(side + 1) * h].to_vec();
            let mut last = 1u16;
            for x in part.iter_mut() {
                if *x == 0 {
                    *x = last
                } else {
                    last = *x
                }
            }
            halves[side].push((e.key, part));
        }
    }
    let meta = t.meta().clone();
    for &l in &levels {
        for &bv in &bvs {
            let mut sz = [0u64; 2];
            let s0 = std::time::Instant::now();
            for side in 0..2 {
                let data: Vec<SliceData> = halves[side]
                    .iter()
                    .map(|(k, v)| SliceData { key: *k, values: v })
                    .collect();
                let p = std::path::PathBuf::from(format!("/tmp/zz_{side}.zmt"));
                let o = WriteOptions {
                    zstd_level: l,
                    block_values: bv,
                    ..WriteOptions::default()
                };
                sz[side] = write_table_with(&p, &meta, &data, &o).unwrap().bytes;
            }
            println!(
                "{} level {l} block {bv}: white {:.2} MB black {:.2} MB ({:.1} s)",
                args[1],
                sz[0] as f64 / 1e6,
                sz[1] as f64 / 1e6,
                s0.elapsed().as_secs_f64()
            );
        }
    }
}
