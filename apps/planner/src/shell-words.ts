/**
 * `splitShellWords`: one flag value holding a whole argument list, split as a POSIX shell splits
 * words, so an operator can write a worker template the way they would type the worker's command:
 *
 *   --worker-args='--model-repository=/models --http-port={http_port} --log-format "ISO8601"'
 *
 * Words are separated by unquoted spaces, tabs and newlines; `'…'` keeps everything literally,
 * `"…"` keeps everything but `\"` and `\\`, a backslash outside quotes keeps the next character.
 * No expansion of any kind (`$VAR`, `~`, globs): the words are passed to the worker as they are.
 * Pure; an unclosed quote or a trailing backslash throws `ShellWordsError`.
 */

export class ShellWordsError extends Error {
  override readonly name = 'ShellWordsError';
}

export function splitShellWords(text: string): string[] {
  const words: string[] = [];
  let word = '';
  let inWord = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r') {
      if (inWord) words.push(word);
      word = '';
      inWord = false;
      continue;
    }
    inWord = true;
    if (c === "'") {
      const end = text.indexOf("'", i + 1);
      if (end < 0) throw new ShellWordsError(`unclosed ' at character ${i + 1}`);
      word += text.slice(i + 1, end);
      i = end;
    } else if (c === '"') {
      let j = i + 1;
      for (; j < text.length && text[j] !== '"'; j++) {
        if (text[j] === '\\' && (text[j + 1] === '"' || text[j + 1] === '\\')) j++;
        word += text[j];
      }
      if (j >= text.length) throw new ShellWordsError(`unclosed " at character ${i + 1}`);
      i = j;
    } else if (c === '\\') {
      if (i + 1 >= text.length) throw new ShellWordsError('trailing backslash');
      word += text[++i];
    } else {
      word += c;
    }
  }
  if (inWord) words.push(word);
  return words;
}
