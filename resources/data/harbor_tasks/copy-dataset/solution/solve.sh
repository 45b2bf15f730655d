wc -w < /solution/text.txt | tr -d " " > count.txt
