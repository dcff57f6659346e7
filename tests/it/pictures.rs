//! Pictures checked as pictures: headless Chromium (Debian `chromium`, installed by .ci/run)
//! runs pages and takes screenshots, and decodes PNGs into pixels (a canvas's `getImageData`),
//! so that a test can assert on what a person would see: the colour at the right edge of a
//! bar, whether two ticks are apart. No PNG decoder crate is needed for it.

use std::path::Path;
use std::process::Command;

/// Runs headless Chromium on `url` with `args` (`--dump-dom`, `--screenshot=...`); stdout.
pub fn chromium(url: &str, args: &[&str]) -> String {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .args(["--disable-dev-shm-usage", "--hide-scrollbars"])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(url)
        .output()
        .expect("chromium (Debian package) is installed by .ci/run");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// An RGB colour.
pub type Rgb = [u8; 3];

/// `#rrggbb` as [`Rgb`].
pub fn hex(s: &str) -> Rgb {
    let s = s.trim_start_matches('#');
    let byte = |i: usize| u8::from_str_radix(&s[i..i + 2], 16).unwrap();
    [byte(0), byte(2), byte(4)]
}

/// Whether two colours are the same within `tolerance` per channel (anti-aliasing, colour
/// management).
pub fn near(a: Rgb, b: Rgb, tolerance: u8) -> bool {
    a.iter().zip(b).all(|(x, y)| x.abs_diff(y) <= tolerance)
}

/// A decoded PNG: width, height and RGBA pixels, row by row.
pub struct Picture {
    /// Width in px.
    pub width: u32,
    /// Height in px.
    pub height: u32,
    rgba: Vec<u8>,
}

impl Picture {
    /// Decodes the PNG at `path` in Chromium.
    pub fn load(path: &Path) -> Picture {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD;
        let png = std::fs::read(path).unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG: {path:?}");
        let dir = tempfile::tempdir().unwrap();
        let page = dir.path().join("decode.html");
        std::fs::write(
            &page,
            format!(
                r#"<!doctype html><body><img id="i" src="data:image/png;base64,{}"><pre id="px"></pre>
<script>
window.onload = () => {{
  const img = document.getElementById('i');
  const c = document.createElement('canvas');
  c.width = img.naturalWidth; c.height = img.naturalHeight;
  const g = c.getContext('2d');
  g.drawImage(img, 0, 0);
  const d = g.getImageData(0, 0, c.width, c.height).data;
  let s = '';
  for (let i = 0; i < d.length; i += 0x8000) s += String.fromCharCode.apply(null, d.subarray(i, i + 0x8000));
  img.remove();
  document.body.dataset.size = c.width + 'x' + c.height;
  document.getElementById('px').textContent = btoa(s);
}};
</script></body>"#,
                b64.encode(&png)
            ),
        )
        .unwrap();
        let dom = chromium(
            &format!("file://{}", page.display()),
            &["--virtual-time-budget=2000", "--dump-dom"],
        );
        let size = dom
            .split("data-size=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .unwrap_or_else(|| panic!("not decoded: {}", &dom[..dom.len().min(500)]));
        let (w, h) = size.split_once('x').unwrap();
        let text = dom
            .split("<pre id=\"px\">")
            .nth(1)
            .and_then(|s| s.split("</pre>").next())
            .unwrap();
        let rgba = b64.decode(text.trim()).unwrap();
        let (width, height) = (w.parse().unwrap(), h.parse().unwrap());
        assert_eq!(rgba.len(), 4 * width as usize * height as usize);
        Picture {
            width,
            height,
            rgba,
        }
    }

    /// The colour at (`x`, `y`); transparent pixels read as white (what a viewer shows).
    pub fn at(&self, x: u32, y: u32) -> Rgb {
        assert!(x < self.width && y < self.height, "({x}, {y}) outside");
        let i = 4 * (y as usize * self.width as usize + x as usize);
        let [r, g, b, a] = [0, 1, 2, 3].map(|k| u32::from(self.rgba[i + k]));
        // Over white: c·a + 255·(1 − a).
        let over = |c: u32| u8::try_from((c * a + 255 * (255 - a)) / 255).unwrap_or(255);
        [over(r), over(g), over(b)]
    }

    /// The x coordinates in row `y` whose colour is `colour` (within `tolerance`).
    pub fn xs_of(&self, y: u32, colour: Rgb, tolerance: u8) -> Vec<u32> {
        (0..self.width)
            .filter(|&x| near(self.at(x, y), colour, tolerance))
            .collect()
    }
}
