# bash completion for tine: source <(tine completion bash)
# Every Tab asks tine itself (tine __complete) what the word may become.
_tine() {
	local line=${COMP_LINE:0:COMP_POINT}
	local -a words out
	read -ra words <<<"$line"
	[[ $line =~ [[:space:]]$ ]] && words+=("")
	((${#words[@]} > 1)) || return
	local prog=${words[0]/#\~/$HOME} cur=${words[-1]}
	mapfile -t out < <("$prog" __complete "${words[@]:1}" 2>/dev/null)
	COMPREPLY=()
	if [[ ${out[0]} == files ]]; then
		compopt -o filenames 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -f -- "$cur")
		return
	fi
	# Bash replaces only the part of the word after its last = or :
	# (COMP_WORDBREAKS): each candidate loses what comes before that.
	local cut=$((${#cur} - ${#COMP_WORDS[COMP_CWORD]}))
	((cut < 0)) && cut=0
	local c
	for c in "${out[@]:1}"; do
		c=${c%%$'\t'*}
		printf -v c '%q' "${c:cut}"
		COMPREPLY+=("$c")
	done
}
complete -F _tine tine
