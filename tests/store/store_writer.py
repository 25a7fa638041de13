"""A profiler stand-in for the store tests: one run, N points with samples, optional delay.

Usage: python store_writer.py STORE_DIR N_POINTS DELAY_S TAG
Prints one line per committed point ("point <id>") so a test knows how far it got.
"""

import sys
import time

from fsc.store import Store

N_STEP_SAMPLES = 12
N_FOLD_SAMPLES = 4


def main() -> None:
    store_dir, n, delay, tag = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    st = Store(store_dir)
    st.register_recipe("tiny", "hash-tiny", "name: tiny\n", ["attention", "mamba"])
    env_id = st.register_environment({"fsc_version": "test", "host": "h", "git_dirty": False})
    run_id = st.start_run("profile", f"store_writer {tag}", env_id, {"tag": tag})
    print(f"run {run_id}", flush=True)
    for i in range(n):
        point = {"recipe": "tiny", "recipe_hash": "hash-tiny", "S": 1024 * (i + 1), "B": 1,
                 "G": 32, "K": 4, "dtype": "fp32", "backend": tag, "step_ms": 1.0 + i,
                 "started_at": time.time(), "ended_at": time.time()}
        samples = {"step": [1.0 + i] * N_STEP_SAMPLES, "fold": [2.0 + i] * N_FOLD_SAMPLES}
        point_id = st.add_point(run_id, point, samples)
        print(f"point {point_id}", flush=True)
        time.sleep(delay)
    st.finish_run(run_id)


if __name__ == "__main__":
    main()
