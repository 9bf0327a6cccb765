;; attachtool: a tool guest written by hand in the WebAssembly text format that exports
;; murmur:tool/run@0.2.0 (wit/murmur-tool-0.2.0.wit), what Murmur >= 0.9 tools export. It
;; answers its input data as its data, the summary "attached", and one attachment
;; {media-type "image/png", path "out/chart.png"}.
;;
;; Layout of memory (one page):
;;   8     "image/png"
;;   24    "out/chart.png"
;;   40    "attached", the summary
;;   64    the tool-result (60 bytes, alignment 4): status 64, summary 68, data 80,
;;         data-path 92, truncated 104, metadata 108, attachments 116
;;   128   the attachment list: one record of two strings (16 bytes)
;;   1024  the heap: a bump allocator, emptied after every call by cabi_post
(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 1024))

  (data (i32.const 8) "image/png")
  (data (i32.const 24) "out/chart.png")
  (data (i32.const 40) "attached")

  ;; cabi_realloc(old_ptr, old_size, align, new_size): bump-allocates within the page;
  ;; running out traps.
  (func (export "cabi_realloc")
    (param $old i32) (param $old_size i32) (param $align i32) (param $size i32) (result i32)
    (local $p i32)
    (if (i32.eqz (local.get $align)) (then (local.set $align (i32.const 1))))
    (local.set $p
      (i32.and
        (i32.add (global.get $heap) (i32.sub (local.get $align) (i32.const 1)))
        (i32.sub (i32.const 0) (local.get $align))))
    (if (i64.gt_u (i64.add (i64.extend_i32_u (local.get $p)) (i64.extend_i32_u (local.get $size))) (i64.const 65536))
      (then unreachable))
    (if (i32.ne (local.get $old) (i32.const 0))
      (then (memory.copy (local.get $p) (local.get $old) (local.get $old_size))))
    (global.set $heap (i32.add (local.get $p) (local.get $size)))
    (local.get $p))

  ;; run(data: option<string>, log-path: option<string>) -> tool-result, flattened; the
  ;; result is returned through memory.
  (func (export "murmur:tool/run@0.2.0#run")
    (param $has_data i32) (param $data i32) (param $len i32)
    (param $has_log i32) (param $log i32) (param $log_len i32)
    (result i32)
    (memory.fill (i32.const 64) (i32.const 0) (i32.const 60))
    (i32.store8 (i32.const 68) (i32.const 1))
    (i32.store (i32.const 72) (i32.const 40))
    (i32.store (i32.const 76) (i32.const 8))
    (if (local.get $has_data)
      (then
        (i32.store8 (i32.const 80) (i32.const 1))
        (i32.store (i32.const 84) (local.get $data))
        (i32.store (i32.const 88) (local.get $len))))
    (i32.store (i32.const 116) (i32.const 128))
    (i32.store (i32.const 120) (i32.const 1))
    (i32.store (i32.const 128) (i32.const 8))
    (i32.store (i32.const 132) (i32.const 9))
    (i32.store (i32.const 136) (i32.const 24))
    (i32.store (i32.const 140) (i32.const 13))
    (i32.const 64))

  (func (export "cabi_post_murmur:tool/run@0.2.0#run") (param i32)
    (global.set $heap (i32.const 1024))))
