# fish completion for tine: tine completion fish | source, or save it as
# ~/.config/fish/completions/tine.fish.
# Every Tab asks tine itself (tine __complete) what the word may become.
function __tine_complete
	set -l words (commandline -opc)
	set -l cur (commandline -ct)
	set -l prog $words[1]
	set -e words[1]
	set -l out ($prog __complete $words "$cur" 2>/dev/null)
	if test "$out[1]" = files
		__fish_complete_path "$cur"
		return
	end
	set -e out[1]
	for line in $out
		printf '%s\n' $line
	end
end
complete -c tine -f -a '(__tine_complete)'
