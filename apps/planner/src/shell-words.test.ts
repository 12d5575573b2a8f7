import { describe, expect, it } from 'vitest';
import { ShellWordsError, splitShellWords } from './shell-words.js';

describe('splitShellWords', () => {
  it('splits on unquoted whitespace and keeps quoted text whole', () => {
    expect(splitShellWords('  --a=1\t--b  2\n')).toEqual(['--a=1', '--b', '2']);
    expect(splitShellWords(`--name='a b' --x="c \\"d\\" \\\\ e" --y=f\\ g '' ""`)).toEqual(['--name=a b', '--x=c "d" \\ e', '--y=f g', '', '']);
    expect(splitShellWords(`'$HOME' ~ *`)).toEqual(['$HOME', '~', '*']);
    expect(splitShellWords('--http-port={http_port} --r={replica}')).toEqual(['--http-port={http_port}', '--r={replica}']);
    expect(splitShellWords('')).toEqual([]);
    expect(splitShellWords(`"a\\b"`)).toEqual(['a\\b']);
  });

  it('refuses an unclosed quote or a trailing backslash', () => {
    for (const bad of [`'abc`, `"abc`, `abc\\`, `"a\\"`]) expect(() => splitShellWords(bad), bad).toThrow(ShellWordsError);
  });
});
