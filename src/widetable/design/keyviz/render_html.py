"""The Key Visualizer as one self-contained HTML page: no network, no external files.

The matrix is embedded as JSON; inline JavaScript draws it on a ``<canvas>``.
Hovering shows the key range, the time and the value; dragging a rectangle
zooms to it, the wheel zooms around the pointer, a double click resets.

Layout (the browser test relies on it): a 56 px header, then the canvas
filling the window; inside it the heatmap spans ``LEFT``..``width - RIGHT``
across and ``TOP``..``height - BOTTOM`` down.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from .matrix import KeyvizMatrix

HEADER, LEFT, RIGHT, TOP, BOTTOM = 56, 240, 16, 8, 36

_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<title>Key Visualizer: __TITLE__</title>
<style>
html,body{margin:0;padding:0;background:#0d0d12;color:#ddd;font:13px system-ui,sans-serif;overflow:hidden}
header{height:__HEADER__px;box-sizing:border-box;padding:8px 14px;border-bottom:1px solid #2a2a35}
header h1{font-size:15px;margin:0 0 4px 0;color:#fff}
header .hint{color:#999;font-size:12px}
canvas{display:block;cursor:crosshair}
#tip{position:fixed;pointer-events:none;background:rgba(20,20,28,.95);border:1px solid #555;
 padding:6px 8px;border-radius:4px;font:12px ui-monospace,monospace;color:#eee;display:none;white-space:pre}
</style></head><body>
<header><h1>Key Visualizer — __TITLE__</h1>
<div class="hint">time →, key space ↓ · __ROWS__ rows (cold ranges merged) · max __MAX__ · drag to zoom, wheel to zoom, double-click to reset</div></header>
<canvas id="kv"></canvas><div id="tip"></div>
<script id="kv-data" type="application/json">__DATA__</script>
<script>
(function(){
"use strict";
var D=JSON.parse(document.getElementById("kv-data").textContent);
var L=__LEFT__,R=__RIGHT__,T=__TOP__,B=__BOTTOM__,H=__HEADER__;
var cv=document.getElementById("kv"),cx=cv.getContext("2d"),tip=document.getElementById("tip");
var nr=D.values.length,nc=nr?D.values[0].length:0,mx=0,i,j;
for(i=0;i<nr;i++)for(j=0;j<nc;j++)if(D.values[i][j]>mx)mx=D.values[i][j];
var view={r0:0,r1:nr,c0:0,c1:nc},drag=null;
var stops=[[0,0,4],[40,11,84],[101,21,110],[159,42,99],[212,72,66],[245,125,21],[250,193,39],[252,255,164]];
function color(v){if(mx<=0)return "rgb(0,0,4)";var x=Math.sqrt(Math.max(v,0)/mx)*(stops.length-1);
 var k=Math.min(Math.floor(x),stops.length-2),f=x-k,a=stops[k],b=stops[k+1];
 return "rgb("+Math.round(a[0]+(b[0]-a[0])*f)+","+Math.round(a[1]+(b[1]-a[1])*f)+","+Math.round(a[2]+(b[2]-a[2])*f)+")";}
function size(){cv.width=window.innerWidth;cv.height=Math.max(window.innerHeight-H,120);draw();}
function geo(){return {w:cv.width-L-R,h:cv.height-T-B};}
function draw(){
 var g=geo();cx.fillStyle="#0d0d12";cx.fillRect(0,0,cv.width,cv.height);
 var rh=g.h/(view.r1-view.r0),cw=g.w/(view.c1-view.c0);
 for(var r=view.r0;r<view.r1;r++){var y=T+(r-view.r0)*rh,row=D.values[r];
  for(var c=view.c0;c<view.c1;c++){cx.fillStyle=color(row[c]);
   cx.fillRect(L+(c-view.c0)*cw,y,Math.ceil(cw)+0.5,Math.ceil(rh)+0.5);}}
 cx.fillStyle="#bbb";cx.font="11px ui-monospace,monospace";cx.textAlign="right";cx.textBaseline="middle";
 var every=Math.max(1,Math.ceil(14/rh));
 for(r=view.r0;r<view.r1;r+=every){cx.fillText(D.rows[r].label.slice(0,34),L-6,T+(r-view.r0+0.5)*rh);}
 cx.textAlign="center";cx.textBaseline="top";
 var ce=Math.max(1,Math.ceil(70/cw));
 for(c=view.c0;c<view.c1;c+=ce){cx.fillText(D.times[c].toFixed(0)+"s",L+(c-view.c0+0.5)*cw,T+g.h+6);}
 if(drag&&drag.moved){cx.strokeStyle="#7fd3ff";cx.lineWidth=1;cx.strokeRect(drag.x0,drag.y0,drag.x1-drag.x0,drag.y1-drag.y0);}
}
function cell(x,y){var g=geo();if(x<L||x>=L+g.w||y<T||y>=T+g.h)return null;
 return {r:view.r0+Math.floor((y-T)/g.h*(view.r1-view.r0)),c:view.c0+Math.floor((x-L)/g.w*(view.c1-view.c0))};}
function pos(e){var b=cv.getBoundingClientRect();return {x:e.clientX-b.left,y:e.clientY-b.top};}
cv.addEventListener("mousemove",function(e){var p=pos(e);
 if(drag){drag.x1=p.x;drag.y1=p.y;drag.moved=Math.abs(drag.x1-drag.x0)+Math.abs(drag.y1-drag.y0)>6;draw();}
 var k=cell(p.x,p.y);if(!k){tip.style.display="none";return;}
 var row=D.rows[k.r];
 tip.textContent="keys  ["+row.start+", "+row.end+")"+(row.buckets>1?"  ("+row.buckets+" buckets)":"")+
  "\\ntime  "+D.times[k.c].toFixed(1)+"s – "+(D.times[k.c]+D.column_seconds).toFixed(1)+"s"+
  "\\n"+D.metric+"  "+(+D.values[k.r][k.c].toFixed(3));
 tip.style.display="block";tip.style.left=(e.clientX+14)+"px";tip.style.top=(e.clientY+14)+"px";});
cv.addEventListener("mouseleave",function(){tip.style.display="none";});
cv.addEventListener("mousedown",function(e){var p=pos(e);drag={x0:p.x,y0:p.y,x1:p.x,y1:p.y,moved:false};});
window.addEventListener("mouseup",function(){if(!drag)return;var d=drag;drag=null;
 if(d.moved){var a=cell(Math.min(d.x0,d.x1),Math.min(d.y0,d.y1)),b=cell(Math.max(d.x0,d.x1)-1,Math.max(d.y0,d.y1)-1);
  if(a&&b)view={r0:a.r,r1:Math.max(b.r+1,a.r+1),c0:a.c,c1:Math.max(b.c+1,a.c+1)};}
 draw();});
cv.addEventListener("wheel",function(e){e.preventDefault();var p=pos(e),k=cell(p.x,p.y);if(!k)return;
 var f=e.deltaY<0?0.8:1.25;
 function z(a0,a1,at,n){var len=Math.min(n,Math.max(1,Math.round((a1-a0)*f)));
  var s=Math.round(at-(at-a0)*len/(a1-a0));s=Math.max(0,Math.min(n-len,s));return [s,s+len];}
 var rr=z(view.r0,view.r1,k.r,nr),cc=z(view.c0,view.c1,k.c,nc);
 view={r0:rr[0],r1:rr[1],c0:cc[0],c1:cc[1]};draw();},{passive:false});
cv.addEventListener("dblclick",function(){view={r0:0,r1:nr,c0:0,c1:nc};draw();});
window.addEventListener("resize",size);
window.kvZoom=function(r0,r1,c0,c1){view={r0:r0,r1:r1,c0:c0,c1:c1};draw();};
size();
})();
</script></body></html>
"""


def render_html(matrix: KeyvizMatrix, path: str | Path) -> Path:
    """Write ``matrix`` as one HTML file that needs no network (see the module docstring)."""
    data = json.dumps(matrix.to_dict(), separators=(",", ":")).replace("</", "<\\/")
    page = (
        _PAGE.replace("__DATA__", data)
        .replace("__TITLE__", html.escape(matrix.title))
        .replace("__ROWS__", str(len(matrix.rows)))
        .replace("__MAX__", f"{matrix.max:g}")
        .replace("__HEADER__", str(HEADER))
        .replace("__LEFT__", str(LEFT)).replace("__RIGHT__", str(RIGHT))
        .replace("__TOP__", str(TOP)).replace("__BOTTOM__", str(BOTTOM))
    )
    path = Path(path)
    path.write_text(page, encoding="utf-8")
    return path
