a=0; b=1
for _ in $(seq 10); do echo $a; t=$((a + b)); a=$b; b=$t; done > fib.txt
