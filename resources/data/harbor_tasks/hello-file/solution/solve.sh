echo "Hello, Harbor!" > hello.txt
