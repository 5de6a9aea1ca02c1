--TEST--
memprof_dump() writes each of the other formats to a stream, with the PHP function in it
--SKIPIF--
<?php if (!extension_loaded("memprof")) die("skip the memprof extension is not loaded"); ?>
--FILE--
<?php
function format_holder() {
    $a = [];
    for ($i = 0; $i < 8; $i++) {
        $a[] = str_repeat('f', 4 << 20);
    }
    return $a;
}
memprof_enable();
$held = format_holder();
foreach (['text', 'collapsed', 'speedscope', 'html'] as $format) {
    $f = fopen('php://memory', 'w+');
    $ok = memprof_dump($f, $format);
    rewind($f);
    $out = stream_get_contents($f);
    $valid = match ($format) {
        'text' => str_starts_with($out, 'libmemprof'),
        'collapsed' => (bool)preg_match('/;format_holder;.* [0-9]+$/m', $out),
        'speedscope' => is_array(json_decode($out, true)),
        'html' => stripos($out, '<html') !== false,
    };
    printf("%s: %s, %s, %s\n", $format, $ok ? 'written' : 'failed', $valid ? 'valid' : 'invalid',
           strpos($out, 'format_holder') !== false ? 'names format_holder' : 'no format_holder');
}
?>
--EXPECT--
text: written, valid, names format_holder
collapsed: written, valid, names format_holder
speedscope: written, valid, names format_holder
html: written, valid, names format_holder
