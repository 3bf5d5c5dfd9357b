/* flamegraph.c - export stage: the call tree as a self-contained interactive
 * SVG flame graph (flamegraph.pl's and py-spy's picture): the folded stacks
 * (folded.h) laid out by flame_layout, one <g> of <title>, <rect> and
 * <text> per frame, the root at the bottom, coloured by frame kind.  A
 * small inline script zooms on a click and highlights a search; it reads
 * ?s=REGEX (search) and ?z=NAME (zoom on the first frame of that name) from
 * the URL too, so a headless browser shows either without a click. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "calltree.h"
#include "export.h"
#include "flamegraph.h"
#include "folded.h"

#define FG_WIDTH 1200.0
#define FG_PAD 10.0
#define FG_FRAME 16.0
#define FG_TOP 56.0
#define FG_BOTTOM 30.0
/* Verdana 12px averages this wide a character (flamegraph.pl's 0.59 em) */
#define FG_CHAR 7.08
/* flamegraph.pl's --minwidth: a tenth of a pixel */
#define FG_MIN_PX 0.1

static const char fg_script[] =
"var W=1200,P=10,C=7.08,fs=[].slice.call(document.querySelectorAll('g.f'));\n"
"fs.forEach(function(g){var r=g.querySelector('rect'),t=g.querySelector('title').textContent;\n"
" g.ox=+r.getAttribute('x');g.ow=+r.getAttribute('width');g.of=r.getAttribute('fill');\n"
" g.d=+g.getAttribute('data-d');g.nm=t.slice(0,t.lastIndexOf(' ('));});\n"
"function label(g,x,w){var t=g.querySelector('text'),n=Math.floor((w-6)/C);\n"
" t.setAttribute('x',(x+3).toFixed(2));\n"
" t.textContent=n<3?'':g.nm.length<=n?g.nm:g.nm.slice(0,n-2)+'..';}\n"
"function zoom(z){var zx=z?z.ox:P,zw=z?z.ow:W-2*P,zd=z?z.d:0,s=(W-2*P)/zw;\n"
" fs.forEach(function(g){var r=g.querySelector('rect'),x=P,w=W-2*P;\n"
"  if(g.ox+g.ow<zx+0.02||g.ox>zx+zw-0.02){g.style.display='none';return;}\n"
"  if(g.d>=zd){x=P+(g.ox-zx)*s;w=g.ow*s;}\n"
"  g.style.display='';g.style.opacity=g.d<zd?0.6:'';\n"
"  r.setAttribute('x',x.toFixed(2));r.setAttribute('width',w.toFixed(2));label(g,x,w);});\n"
" document.getElementById('unzoom').style.opacity=z?1:0;}\n"
"function search(t){var re,iv=[],s=0,e=-1;\n"
" try{re=new RegExp(t);}catch(x){re=new RegExp(t.replace(/[^\\w\\s]/g,'\\\\$&'));}\n"
" fs.forEach(function(g){var hit=!!t&&re.test(g.nm);\n"
"  g.querySelector('rect').setAttribute('fill',hit?'rgb(230,0,230)':g.of);\n"
"  if(hit){g.setAttribute('data-m','1');iv.push([g.ox,g.ox+g.ow]);}else g.removeAttribute('data-m');});\n"
" iv.sort(function(a,b){return a[0]-b[0];});\n"
" iv.forEach(function(v){if(v[0]>e){s+=v[1]-v[0];e=v[1];}else if(v[1]>e){s+=v[1]-e;e=v[1];}});\n"
" document.getElementById('matched').textContent=t?'Matched: '+(100*s/(W-2*P)).toFixed(2)+'%':'';}\n"
"document.documentElement.addEventListener('click',function(e){var g=e.target.closest('g.f');\n"
" if(g)zoom(g);else if(e.target.id=='unzoom')zoom(null);\n"
" else if(e.target.id=='search')search(prompt('Search (regular expression)','')||'');});\n"
"document.documentElement.addEventListener('mouseover',function(e){var g=e.target.closest('g.f');\n"
" document.getElementById('details').textContent=g?g.querySelector('title').textContent:' ';});\n"
"var q=new URLSearchParams(location.search||location.hash.slice(1)),qz=q.get('z');\n"
"if(qz)zoom(fs.filter(function(g){return g.nm==qz;})[0]||null);\n"
"if(q.get('s'))search(q.get('s'));\n";

static const char *const kind_names[] = { "op", "python", "layer", "native" };

/* Stable variation within a kind's hue, as flamegraph.pl varies by name. */
static double name_hash(const char *s)
{
	uint32_t h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return (h % 1000) / 1000.0;
}

/* ops warm (flamegraph.pl's "hot"), Python yellow, layers blue, native grey */
static void fill(char *buf, size_t len, const struct flame_box *b)
{
	double v = name_hash(b->name);

	switch (b->depth ? b->kind : CT_OTHER) {
	case CT_OP:
		snprintf(buf, len, "rgb(%d,%d,%d)", 205 + (int)(50 * v), 60 + (int)(120 * v), 30);
		break;
	case CT_PYTHON:
		snprintf(buf, len, "rgb(%d,%d,%d)", 200 + (int)(40 * v), 200 + (int)(40 * v), 60 + (int)(40 * v));
		break;
	case CT_LAYER:
		snprintf(buf, len, "rgb(%d,%d,%d)", 70 + (int)(50 * v), 140 + (int)(60 * v), 210 + (int)(40 * v));
		break;
	default:
		snprintf(buf, len, "rgb(%d,%d,%d)", 165 + (int)(50 * v), 165 + (int)(50 * v), 165 + (int)(50 * v));
	}
}

static void put_frame(FILE *out, const struct flame_box *b, const struct flame_layout *fl,
		      double height, const char *unit)
{
	double scale = (FG_WIDTH - 2 * FG_PAD) / (double)fl->total;
	/* both edges rounded as printed: a child's edges then meet its
	 * parent's and its siblings' exactly */
	double x = round(100 * (FG_PAD + (double)b->x * scale)) / 100;
	double w = round(100 * (FG_PAD + (double)(b->x + b->width) * scale)) / 100 - x;
	double y = height - FG_BOTTOM - (b->depth + 1) * FG_FRAME;
	long chars = (long)((w - 6) / FG_CHAR);
	char rgb[48];
	bool cut = false;
	size_t show = chars >= 3 ? flame_fit(b->name, (size_t)chars, &cut) : 0;

	if (cut)   /* room for ".." */
		show = flame_fit(b->name, (size_t)chars - 2, &cut);
	fill(rgb, sizeof(rgb), b);
	fprintf(out, "<g class=\"f\" data-k=\"%s\" data-d=\"%u\"><title>",
		kind_names[b->kind < 4 && b->depth ? b->kind : CT_OTHER], b->depth);
	flame_xml_put(out, b->name, strlen(b->name));
	fprintf(out, " (%llu %s, %.2f%%)</title><rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" "
		"fill=\"%s\" rx=\"2\" ry=\"2\"/><text x=\"%.2f\" y=\"%.1f\">",
		(unsigned long long)b->width, unit, 100.0 * (double)b->width / (double)fl->total,
		x, y, w, FG_FRAME - 1, rgb, x + 3, y + 11.5);
	flame_xml_put(out, b->name, show);
	fprintf(out, "%s</text></g>\n", show && cut ? ".." : "");
}

static void put_header(FILE *out, double height, bool count)
{
	fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
		"xmlns=\"http://www.w3.org/2000/svg\">\n"
		"<style>text{font-family:Verdana,sans-serif;font-size:12px;fill:#000}"
		"g.f:hover rect{stroke:#000;stroke-width:0.5}g.f{cursor:pointer}"
		"#title{font-size:17px;text-anchor:middle}#search,#unzoom{cursor:pointer}"
		"#search,#matched{text-anchor:end}</style>\n"
		"<rect x=\"0\" y=\"0\" width=\"100%%\" height=\"100%%\" fill=\"#f6f6f0\"/>\n"
		"<text id=\"title\" x=\"%.0f\" y=\"24\">tbpf flame graph: %s</text>\n"
		"<text id=\"unzoom\" x=\"%.0f\" y=\"24\" style=\"opacity:0\">Reset Zoom</text>\n"
		"<text id=\"search\" x=\"%.0f\" y=\"24\">Search</text>\n"
		"<text id=\"matched\" x=\"%.0f\" y=\"%.0f\"> </text>\n"
		"<text id=\"details\" x=\"%.0f\" y=\"%.0f\"> </text>\n",
		FG_WIDTH, height, FG_WIDTH, height, FG_WIDTH / 2,
		count ? "op calls by stack" : "self CPU time by stack", FG_PAD, FG_WIDTH - FG_PAD,
		FG_WIDTH - FG_PAD, height - 10, FG_PAD, height - 10);
}

int export_flamegraph(FILE *out, const struct calltree *ct, const struct export_opts *o)
{
	bool count = o && o->metric_count;
	struct folded_line *l;
	struct flame_layout fl;
	size_t n;
	int err = folded_lines(ct, count, &l, &n);

	if (err)
		return err;
	err = flame_layout(l, n, FG_MIN_PX / (FG_WIDTH - 2 * FG_PAD), &fl);
	folded_lines_free(l, n);
	if (err)
		return err;
	double height = FG_TOP + (fl.max_depth + 1) * FG_FRAME + FG_BOTTOM;
	put_header(out, height, count);
	if (!fl.total)
		fprintf(out, "<text x=\"%.0f\" y=\"%.0f\">no stacks recorded</text>\n", FG_PAD, FG_TOP);
	for (size_t i = 0; fl.total && i < fl.n; i++)
		put_frame(out, &fl.boxes[i], &fl, height, count ? "calls" : "us");
	fprintf(out, "<script type=\"text/ecmascript\"><![CDATA[\n%s]]></script>\n</svg>\n", fg_script);
	flame_layout_free(&fl);
	return ferror(out) ? -EIO : 0;
}
