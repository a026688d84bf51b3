#compdef tine
# zsh completion for tine: source <(tine completion zsh) after compinit,
# or save it as _tine in a folder of $fpath.
# Every Tab asks tine itself (tine __complete) what the word may become.
_tine() {
	local prog=${words[1]/#\~/$HOME}
	local -a out cands
	out=("${(@f)$("$prog" __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
	if [[ ${out[1]} == files ]]; then
		_files
		return
	fi
	local line value desc
	for line in "${(@)out[2,-1]}"; do
		[[ -n $line ]] || continue
		value=${line%%$'\t'*}
		desc=
		[[ $line == *$'\t'* ]] && desc=${line#*$'\t'}
		cands+=("${value//:/\\:}${desc:+:$desc}")
	done
	((${#cands})) && _describe -t values tine cands
}
if [[ ${zsh_eval_context[-1]} == loadautofunc ]]; then
	_tine "$@"
else
	compdef _tine tine
fi
