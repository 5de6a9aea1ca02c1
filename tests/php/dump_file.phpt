--TEST--
memprof_dump_file() writes a file in the format of its extension, or the one given; a failure is a warning and false
--SKIPIF--
<?php if (!extension_loaded("memprof")) die("skip the memprof extension is not loaded"); ?>
--FILE--
<?php
function file_holder() {
    $a = [];
    for ($i = 0; $i < 8; $i++) {
        $a[] = str_repeat('d', 4 << 20);
    }
    return $a;
}
memprof_enable();
$held = file_holder();
$base = __DIR__ . '/dump_file.out';
var_dump(memprof_dump_file("$base.txt"));
echo substr(file_get_contents("$base.txt"), 0, 10), "\n";
var_dump(memprof_dump_file("$base.data", 'collapsed'));
var_dump((bool)preg_match('/;file_holder;.* [0-9]+$/m', file_get_contents("$base.data")));
var_dump(memprof_dump_file(__DIR__ . '/no/such/dir/p.txt'));
@unlink("$base.txt");
@unlink("$base.data");
?>
--EXPECTF--
bool(true)
libmemprof
bool(true)
bool(true)

Warning: memprof_dump_file(): cannot write the profile to %s/no/such/dir/p.txt: %s in %s on line %d
bool(false)
