local fib(n) = if n < 2 then n else fib(n - 1) + fib(n - 2);
local words = std.split('the quick brown fox jumps over the lazy dog', ' ');
[
  {
    fib: fib(18),
    sorted: std.sort(words),
    joined: std.join('-', std.map(std.asciiUpper, words)),
    sum: std.foldl(function(a, b) a + b, std.range(1, 2000), 0),
  }
  for i in std.range(1, 20)
]
