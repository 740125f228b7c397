/**
 * Every relative link in README.md and docs/*.md leads somewhere: the file exists and, when the
 * link names an anchor, the target has a heading with that anchor (GitHub's slugs).
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const ROOT = join(__dirname, '..', '..');

function documents(): string[] {
  const docs = join(ROOT, 'docs');
  const inDocs = existsSync(docs)
    ? readdirSync(docs)
        .filter((f) => f.endsWith('.md'))
        .map((f) => join(docs, f))
    : [];
  return [join(ROOT, 'README.md'), ...inDocs];
}

/** Markdown without fenced code blocks, where `#` and brackets are code. */
function withoutFences(markdown: string): string {
  return markdown.replace(/^\s*```[\s\S]*?^\s*```/gm, '');
}

/** Markdown without any code, where brackets are code, not links. */
function prose(markdown: string): string {
  return withoutFences(markdown).replace(/`[^`\n]*`/g, '');
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
export function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The anchors a markdown file offers; repeated headings get -1, -2, … as on GitHub. */
export function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const [, text] of withoutFences(markdown).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = slug(text.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1'));
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** The relative link targets of a markdown file (`[text](target)` and images). */
export function relativeLinks(markdown: string): string[] {
  return [...prose(markdown).matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map(([, target]) => target).filter((t) => !/^[a-z][a-z0-9+.-]*:/i.test(t));
}

/** Why a link from `file` does not resolve, or undefined when it does. */
function problem(file: string, target: string): string | undefined {
  const [path, anchor] = target.split('#', 2) as [string, string | undefined];
  const dest = path === '' ? file : resolve(dirname(file), decodeURIComponent(path));
  if (!existsSync(dest)) return `no file ${relative(ROOT, dest)}`;
  if (anchor === undefined || anchor === '') return undefined;
  if (!dest.endsWith('.md') || statSync(dest).isDirectory()) return `anchor #${anchor} on a file that is not markdown`;
  return anchors(readFileSync(dest, 'utf8')).has(decodeURIComponent(anchor)) ? undefined : `no heading #${anchor} in ${relative(ROOT, dest)}`;
}

test('headings get GitHub anchors', () => {
  expect([...anchors('# A `b` (c)\n## 2. Poll URLs (e.g. x@10)\n## A b c\n```\n# not a heading\n```\n')]).toEqual(['a-b-c', '2-poll-urls-eg-x10', 'a-b-c-1']);
});

test('links in code are not links, external ones are not checked', () => {
  expect(relativeLinks('[a](b.md) `[x](y.md)` [c](https://x.y/z) ![i](docs/p.png)\n```\n[d](e.md)\n```\n')).toEqual(['b.md', 'docs/p.png']);
});

describe.each(documents().map((f) => [relative(ROOT, f), f]))('%s', (_name, file) => {
  const links = relativeLinks(readFileSync(file, 'utf8'));

  test('has links to check', () => {
    expect(links.length).toBeGreaterThan(0);
  });

  test('every relative link resolves', () => {
    const broken = links.map((t) => [t, problem(file, t)]).filter(([, why]) => why !== undefined);
    expect(broken).toEqual([]);
  });
});
