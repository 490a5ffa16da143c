#!/bin/sh
# agent.sh is the command-line agent the transcripts here were recorded
# from (see record_test.go): it takes the prompt as its last argument and
# prints its answer on stdout, a line at a time. The prompt's last line is
# the new message; the lines before it, if any, are the earlier turns the
# plugin hands off ("User: ..." and "Assistant: ...").
for prompt; do :; done
message=$(printf '%s\n' "$prompt" | tail -n 1)
case $message in
"Remember the word: "*)
	word=${message#Remember the word: }
	echo "I will remember ${word%.}."
	;;
"What was the word?")
	word=$(printf '%s\n' "$prompt" | sed -n 's/^User: Remember the word: \(.*\)\.$/\1/p' | tail -n 1)
	if [ -n "$word" ]; then
		echo "The word was $word."
	else
		echo "I was not told a word."
	fi
	;;
"Count slowly.")
	n=1
	while [ $n -le 30 ]; do
		echo "$n"
		n=$((n + 1))
		sleep 1
	done
	;;
"Crash.")
	echo "Starting."
	kill -KILL $$
	;;
"Print the file.")
	echo "Here is the file:"
	printf 'GIF89a\001\000\001\000\n'
	printf '\000\000;\n'
	echo "That was all of it."
	;;
"Fail.")
	echo "agent: warming up" >&2
	echo "agent: no model is configured" >&2
	exit 3
	;;
*)
	echo "You said: $message"
	echo "That is $(printf '%s' "$message" | wc -w | tr -d ' ') words."
	;;
esac
