--TEST--
memprof_top_sites() names the PHP function that allocated, with its file and the line of the allocation
--SKIPIF--
<?php if (!extension_loaded("memprof")) die("skip the memprof extension is not loaded"); ?>
--FILE--
<?php
function build_report() {
    $parts = [];
    for ($i = 0; $i < 20; $i++) {
        $parts[] = str_repeat('r', 4 << 20);
    }
    return $parts;
}
class Cache {
    public $items = [];
    public function fill() {
        for ($i = 0; $i < 5; $i++) {
            $this->items[] = str_repeat('c', 4 << 20);
        }
    }
}
memprof_enable();
$report = build_report();
$cache = new Cache();
$cache->fill();
foreach (array_slice(memprof_top_sites(), 0, 2) as $s) {
    printf("%s %s:%d %s\n", $s['function'], basename($s['file']), $s['line'],
           $s['bytes'] > 0 && $s['samples'] > 0 ? 'has bytes' : 'empty');
}
?>
--EXPECT--
build_report top_site_names_function_file_line.php:5 has bytes
Cache::fill top_site_names_function_file_line.php:13 has bytes
