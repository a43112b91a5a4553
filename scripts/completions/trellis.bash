# Bash completion for trellis: subcommands and options, read from `trellis ... --help` itself, so
# that it never falls behind the binary. Install: source this file, or copy it to
# /usr/share/bash-completion/completions/trellis.

# The subcommands and options that `trellis WORDS... --help` lists.
_trellis_help_words() {
  "$1" "${@:2}" --help 2>/dev/null | awk '
    /^Subcommands:/ { sub_section = 1; next }
    /^Options:/ { sub_section = 0; next }
    sub_section && /^  [a-z]/ { print $1; next }
    /^  -/ { n = split($1, names, ","); for (i = 1; i <= n; i++) print names[i] }'
}

_trellis() {
  local cur=${COMP_WORDS[COMP_CWORD]}
  local prev=${COMP_WORDS[COMP_CWORD - 1]}
  # The subcommand path typed so far: the words that are not options or their values.
  local path=() i word
  for ((i = 1; i < COMP_CWORD; i++)); do
    word=${COMP_WORDS[i]}
    [[ $word == -* ]] && continue
    [[ ${COMP_WORDS[i - 1]} == -* && ${COMP_WORDS[i - 1]} != *=* ]] && continue
    path+=("$word")
  done
  case $prev in
    -m | --model | -o | --output | --models-dir | --cache-dir | --draft-model | --vocab-from | \
      --imatrix | -f | --text | --config)
      COMPREPLY=($(compgen -f -- "$cur"))
      return
      ;;
  esac
  COMPREPLY=($(compgen -W "$(_trellis_help_words "${COMP_WORDS[0]}" "${path[@]}")" -- "$cur"))
}

complete -o default -F _trellis trellis
